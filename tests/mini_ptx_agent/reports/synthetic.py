"""Synthetic per-turn rows with hand-computed answers, and the turns.csv an experiment writes for them.

Model ``alpha`` (4 trajectories, sm_90a, target 1.2x):

- ``a1``: incorrect, PASSED 0.5x, PASSED 1.5x (target met; HGMMA + UTMALDG in the SASS, Nsight saw both run)
- ``a2``: compile error, incorrect x3, PASSED 2.0x (target met; HGMMA only: not verified)
- ``a3``: eight format errors
- ``a4``: PASSED 0.8x (HGMMA + UTMALDG, not profiled)

Model ``beta`` (3 trajectories): ``b1`` not executed then incorrect (unknown), ``b2`` an infrastructure
failure (unknown), ``b3`` incorrect (known, wrong).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mini_ptx_agent.runs.turns import TurnRow

HOPPER = ["HGMMA", "UTMALDG"]


def row(trajectory: str, turn: int, failure: str, speedup: float | None = None, **extra) -> TurnRow:
    """One TurnRow; ``speedup`` makes it a GPU-timed PASSED turn with that minimum speedup (x)."""
    passed = failure == "PASSED"
    fields = {
        "experiment": "exp", "trajectory": trajectory, "model": "alpha" if trajectory[0] == "a" else "beta",
        "definition": "gemm_n7168_k5120", "language": "cuda", "arch": "sm_90a", "prompt_tag": "hopper-no-hint",
        "replica": 0, "turn": turn, "failure_class": failure,
        "status": {"PASSED": "PASSED", "format": "FORMAT_ERROR", "compile": "COMPILE_ERROR",
                   "incorrect": "INCORRECT_NUMERICAL", "not_executed": "NOT_EXECUTED",
                   "infrastructure": "INFRASTRUCTURE_ERROR"}[failure],
        "executed_on_gpu": passed or failure == "incorrect", "target_speedup": 1.2,
        "target_met": bool(speedup and speedup >= 1.2), "min_speedup": speedup,
        "speedups": {"w0": speedup} if passed else {}, "speedup_basis": "baseline" if passed else None,
        "tokens_out": 1000 * turn,
    }  # fmt: skip
    return TurnRow(**(fields | extra))


def alpha_beta_rows() -> list[TurnRow]:
    """The rows described in the module docstring."""
    return [
        row("a1", 1, "incorrect"),
        row("a1", 2, "PASSED", 0.5, sass_families=HOPPER),
        row("a1", 3, "PASSED", 1.5, sass_families=HOPPER, executed_families=HOPPER),
        row("a2", 1, "compile"),
        *(row("a2", t, "incorrect") for t in (2, 3, 4)),
        row("a2", 5, "PASSED", 2.0, sass_families=["HGMMA"]),
        *(row("a3", t, "format") for t in range(1, 9)),
        row("a4", 1, "PASSED", 0.8, sass_families=HOPPER),
        row("b1", 1, "not_executed"),
        row("b1", 2, "incorrect"),
        row("b2", 1, "infrastructure"),
        row("b3", 1, "incorrect"),
    ]


def write_turns_csv(path: Path, rows: list[TurnRow]) -> None:
    """A turns.csv of ``rows``: TurnRow fields as columns, mappings and lists as JSON, None as empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(TurnRow.model_fields)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for r in rows:
            data = r.model_dump(mode="json")
            writer.writerow(
                {
                    k: ""
                    if data[k] is None
                    else json.dumps(data[k])
                    if isinstance(data[k], dict | list)
                    else data[k]
                    for k in names
                }
            )


def write_run_dir(root: Path, name: str, turns: list[tuple[str, float | None]], *, model: str = "gamma",
                  hardware: str = "NVIDIA H200") -> Path:  # fmt: skip
    """A trajectory run directory as the agent writes it: plan.json, the trajectory, one KernelReport per turn.

    ``turns``: (status, speedup) per turn, e.g. ``("PASSED", 1.3)``; ``FORMAT_ERROR`` is a reply without a
    kernel. Each reply holds ``// the kernel of turn N`` in a cuda block; each feedback reads ``feedback of
    turn N``. Workloads ran on ``hardware`` and were timed against the baseline ``gemm_baseline``.
    """
    from mini_ptx_agent.environment.report import KernelReport, StaticAnalysis, WorkloadResult
    from mini_ptx_agent.runs.directory import RunLayout, RunPlan
    from mini_ptx_agent.task import TaskConfig

    layout = RunLayout(root / name)
    task = TaskConfig(definition="gemm_n7168_k5120", language="cuda", target_speedup=1.2)
    plan = RunPlan(run_id=name, created_at="2026-12-02T00:00:00+00:00", task=task, model=model,
                   prompt_tag="hopper-no-hint", num_turns=max(1, len(turns)), service="test")  # fmt: skip
    layout.root.mkdir(parents=True)
    layout.plan_path.write_text(plan.model_dump_json(), encoding="utf-8")
    messages: list[dict] = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for turn, (status, speedup) in enumerate(turns, start=1):
        messages.append(
            {
                "role": "assistant",
                "content": f"reply {turn}\n```cuda\n// the kernel of turn {turn}\n```\n"
                if status != "FORMAT_ERROR"
                else "a reply without a kernel",
                "extra": {"usage": {"completion_tokens": 500}},
            }
        )
        if status == "FORMAT_ERROR":
            messages.append(
                {
                    "role": "user",
                    "content": "no kernel",
                    "extra": {"ptxbench": {"kind": "format_error", "turn": turn}},
                }
            )
            continue
        passed = status == "PASSED"
        workload = WorkloadResult(
            workload_uuid="w0", status=status, hardware=hardware, executed_on_gpu=True,
            speedup=speedup if passed else None, latency_ms=1.0, speedup_basis="baseline" if passed else None,
            baseline="gemm_baseline", baseline_description="cuBLAS-free tiled wgmma GEMM",
        )  # fmt: skip
        report = KernelReport(
            status=status, definition=task.definition, language="cuda", all_passed=passed,
            min_speedup=speedup if passed else None, target_speedup=1.2, executed_on_gpu=True,
            target_met=bool(passed and speedup and speedup >= 1.2), workloads=[workload],
            static_analysis=StaticAnalysis(compiled=True, sass_families=["HGMMA", "UTMALDG"]),
        )  # fmt: skip
        path = layout.trajectory_dir / "evaluations" / f"turn_{turn:03d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report.model_dump_json(), encoding="utf-8")
        messages.append(
            {
                "role": "user",
                "content": f"feedback of turn {turn}",
                "extra": {"ptxbench": {"kind": "evaluation", "turn": turn}},
            }
        )
    if turns:
        layout.trajectory_path.parent.mkdir(parents=True, exist_ok=True)
        layout.trajectory_path.write_text(
            json.dumps({"trajectory_format": "mini-swe-agent-1.1", "messages": messages})
        )
    return layout.root


def write_experiment_plan(root: Path, name: str, replicas: dict[str, int]) -> None:
    """``root/plan.json`` of an experiment named ``name`` listing the trajectories ``replicas`` (id -> replica)
    of ``write_run_dir``'s task, as ``ptxbench experiment`` writes it."""
    from mini_ptx_agent.experiments.config import ExperimentConfig, config_hash
    from mini_ptx_agent.experiments.plan import ExperimentPlan, PlannedTrajectory

    config = ExperimentConfig(
        name="gemm", definitions={"names": ["gemm_n7168_k5120"]}, models=[{"name": "gamma"}]
    )
    trajectories = [
        PlannedTrajectory(id=t, definition="gemm_n7168_k5120", language="cuda", prompt_tag="hopper-no-hint",
                          model="gamma", replica=replica, seed=replica, workloads=["w0"])
        for t, replica in replicas.items()
    ]  # fmt: skip
    plan = ExperimentPlan(name=name, created_at="2026-12-02T00:00:00+00:00", config=config,
                          config_hash=config_hash(config), num_turns=3, trajectories=trajectories)  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / "plan.json").write_text(plan.model_dump_json(), encoding="utf-8")
