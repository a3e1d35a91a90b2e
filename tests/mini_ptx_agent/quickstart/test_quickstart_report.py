"""quickstart-result.json from a run directory's files: counts, best speedup and the three separate verdicts.

The run directories here have the layout `ptxbench quickstart --run` writes on a GPU (evaluator results as the
agent writes them); the CPU-mode layout is covered end to end in test_quickstart_e2e.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mini_ptx_agent.environment.report import KernelReport, WorkloadResult
from mini_ptx_agent.quickstart.report import build_result, render
from mini_ptx_agent.quickstart.settings import QUICKSTART_WORKLOAD, quickstart_task
from mini_ptx_agent.runs.directory import RunLayout, RunPlan
from mini_ptx_agent.runs.summary import RunSummary
from rich.console import Console


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _report(status: str, speedup: float | None, target: float = 1.0) -> dict:
    passed = status == "PASSED"
    workload = WorkloadResult(
        workload_uuid=QUICKSTART_WORKLOAD, axes={"M": 8192}, status="PASSED" if passed else "INCORRECT_NUMERICAL",
        hardware="NVIDIA H200", executed_on_gpu=True, speedup=speedup if passed else None,
        latency_ms=0.7 / speedup if passed and speedup else None, reference_latency_ms=0.7 if passed else None,
    )  # fmt: skip
    return KernelReport(
        status=status, definition="gemm_n7168_k5120", language="cuda", all_passed=passed,
        min_speedup=speedup if passed else None, target_speedup=target, executed_on_gpu=True,
        target_met=bool(passed and speedup is not None and speedup >= target), workloads=[workload],
    ).model_dump(mode="json")  # fmt: skip


def _gpu_run(tmp_path: Path, speedups: list[float | None], exit_status: str = "LimitsExceeded") -> Path:
    run = tmp_path / "quickstart-20260101T000000Z-cuda-gemm"
    layout = RunLayout(run)
    plan = RunPlan(
        run_id=run.name, created_at="2026-01-01T00:00:00+00:00", task=quickstart_task("cuda"),
        model="ptxbench-demo-replay", prompt_tag="hopper-no-hint", num_turns=3, service="embedded",
    )  # fmt: skip
    _write(layout.plan_path, plan.model_dump(mode="json"))
    versions = []
    for turn, speed in enumerate(speedups, start=1):
        status = "PASSED" if speed is not None else "INCORRECT_NUMERICAL"
        _write(layout.trajectory_dir / "evaluations" / f"turn_{turn:03d}.json", _report(status, speed))
        if speed is not None:
            versions.append(turn)
            (layout.success_dir).mkdir(parents=True, exist_ok=True)
            (layout.success_dir / f"kernel_v{turn}.cu").write_text("// v", encoding="utf-8")
    if speedups:
        (layout.trajectory_dir / "kernel.cu").write_text("// latest", encoding="utf-8")
    summary = RunSummary(
        run_id=run.name, exit_status=exit_status, runner_completed=exit_status != "InfrastructureError",
        kernel_correct=bool(versions),
        target_met=exit_status == "Submitted", turns=len(speedups), correct_versions=versions, elapsed_s=1.0,
    )  # fmt: skip
    _write(layout.summary_path, summary.model_dump(mode="json"))
    _write(layout.trajectory_path, {"trajectory_format": "mini-swe-agent-1.1", "messages": [
        {"role": "user", "content": "VERDICT: the last feedback", "extra": {"ptxbench": {"kind": "evaluation"}}},
    ]})  # fmt: skip
    _write(
        RunLayout(run).quickstart_context_path,
        {"demo": True, "service": {"kind": "embedded", "lanes": ["cuda:0"], "gpu": True}},
    )
    return run


def _text(result, run: Path) -> str:
    console = Console(record=True, width=200, color_system=None)
    render(result, run, console)
    return console.export_text()


def test_target_achieved_on_the_last_turn(tmp_path):
    run = _gpu_run(tmp_path, [0.01, 0.05, 1.02], exit_status="Submitted")
    result = build_result(run)
    assert (
        result.kernel_counts.generated,
        result.kernel_counts.correct,
        result.kernel_counts.target_achieved,
    ) == (3, 3, 1)
    assert (result.best_speedup, result.best_turn, result.best_on_gpu) == (1.02, 3, True)
    assert result.service.hardware == ["NVIDIA H200"]
    assert result.experiments[0].versions == [f"success/exp_000/kernel_v{t}.cu" for t in (1, 2, 3)]
    assert result.final_feedback_excerpt == "VERDICT: the last feedback"
    text = _text(result, run)
    assert "Target achieved:       yes: 1.020x >= 1.00x at turn 3" in text
    assert "DEMO REPLAY" in text and "CPU mode" not in text


def test_correct_but_below_target_is_not_achieved(tmp_path):
    result = build_result(_gpu_run(tmp_path, [None, 0.05, 0.99]))
    assert (result.kernel_counts.correct, result.kernel_counts.target_achieved, result.best_speedup) == (
        2,
        0,
        0.99,
    )
    text = _text(result, tmp_path)
    assert "A kernel was correct:  yes: 2 of 3" in text
    assert "Target achieved:       no: best 0.990x < 1.00x (turn 3)" in text


def test_no_correct_kernel(tmp_path):
    result = build_result(_gpu_run(tmp_path, [None, None, None]))
    assert (result.kernel_counts.correct, result.best_speedup, result.experiments[0].versions) == (
        0,
        None,
        [],
    )
    assert "none of 3 kernels passed" in _text(result, tmp_path)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"plan\.json is missing"):
        build_result(tmp_path)


def _cpu_run(tmp_path: Path, statuses: list[str]) -> Path:
    """A CPU-mode run: the evaluator results say each kernel was built (or not) but nothing was executed."""
    run = _gpu_run(tmp_path, [None] * len(statuses))
    for turn, status in enumerate(statuses, start=1):
        report = KernelReport(
            status=status, definition="gemm_n7168_k5120", language="cuda", all_passed=False,
            target_speedup=1.0, executed_on_gpu=False, workloads=[],
        ).model_dump(mode="json")  # fmt: skip
        _write(RunLayout(run).trajectory_dir / "evaluations" / f"turn_{turn:03d}.json", report)
    _write(
        RunLayout(run).quickstart_context_path,
        {"demo": True, "service": {"kind": "embedded", "lanes": ["cpu"], "gpu": False}},
    )
    return run


def test_not_executed_kernels_are_unknown_in_the_file_as_on_the_console(tmp_path):
    run = _cpu_run(tmp_path, ["NOT_EXECUTED"] * 3)
    result = build_result(run)
    written = json.loads(result.model_dump_json())
    assert written["schema_version"] == "ptxbench.quickstart/4"
    assert written["kernel_correct"] is None
    assert [t["correct"] for t in written["turns"]] == [None, None, None]
    assert (written["kernel_counts"]["correct"], written["kernel_counts"]["not_executed"]) == (0, 3)
    assert "A kernel was correct:  unknown" in _text(result, run)


def test_a_failed_build_is_not_correct_but_one_unexecuted_kernel_keeps_it_unknown(tmp_path):
    result = build_result(_cpu_run(tmp_path, ["COMPILE_ERROR", "NOT_EXECUTED"]))
    assert [t.correct for t in result.turns] == [False, None]
    assert result.kernel_correct is None


def test_kernel_correct_is_a_definite_answer_when_kernels_were_executed(tmp_path):
    assert build_result(_gpu_run(tmp_path / "a", [None, None, None])).kernel_correct is False
    assert build_result(_gpu_run(tmp_path / "b", [None, 0.5, None])).kernel_correct is True


def test_summary_kernel_correct_is_null_when_nothing_was_executed(tmp_path):
    from mini_ptx_agent.runs.summary import evaluation_statuses, kernel_correctness, summarize

    run = _cpu_run(tmp_path, ["NOT_EXECUTED"] * 3)
    statuses = evaluation_statuses(RunLayout(run))
    assert statuses == ["NOT_EXECUTED"] * 3
    trajectory = {"messages": [], "info": {"ptxbench": {"turns": 3, "versions": []}}}
    summary = summarize(
        run.name, {"exit_status": "LimitsExceeded"}, trajectory, resumed=False, statuses=statuses
    )
    dumped = summary.model_dump(mode="json")
    assert dumped["kernel_correct"] is None and dumped["schema_version"] == "ptxbench.run/3"
    assert kernel_correctness([], ["COMPILE_ERROR", "INCORRECT_NUMERICAL"], runner_completed=True) is False
    assert kernel_correctness([2], ["NOT_EXECUTED", "PASSED"], runner_completed=True) is True
    assert kernel_correctness([], [], runner_completed=True) is False  # only format errors: the model's doing


def test_an_outage_before_any_kernel_is_unknown_not_false(tmp_path):
    from mini_ptx_agent.runs.summary import kernel_correctness

    assert kernel_correctness([], [], runner_completed=False) is None
    assert kernel_correctness([], ["INCORRECT_NUMERICAL"], runner_completed=False) is False
    run = _gpu_run(tmp_path, [], exit_status="InfrastructureError")
    result = build_result(run)
    assert result.kernel_correct is None and result.kernel_counts.generated == 0
    text = _text(result, run)
    assert "A kernel was correct:  unknown: no kernel was evaluated" in text


def test_a_refused_demo_run_says_why_once_and_claims_no_replay(tmp_path):
    from mini_ptx_agent.quickstart.settings import TRITON_ALTERNATIVES, TRITON_NEEDS_GPU

    run = tmp_path / "quickstart-20260101T000000Z-triton-gemm"
    layout = RunLayout(run)
    plan = RunPlan(
        run_id=run.name, created_at="2026-01-01T00:00:00+00:00", task=quickstart_task("triton"),
        model="ptxbench-demo-replay", prompt_tag="triton-hopper", num_turns=3, service="http://gpu-less:1",
    )  # fmt: skip
    refused = f"{TRITON_NEEDS_GPU}. {TRITON_ALTERNATIVES}"
    _write(layout.plan_path, plan.model_dump(mode="json"))
    summary = RunSummary(
        run_id=run.name, exit_status="Refused", exit_message=refused, runner_completed=False,
        kernel_correct=None, target_met=False, turns=0, elapsed_s=0.1,
    )  # fmt: skip
    _write(layout.summary_path, summary.model_dump(mode="json"))
    _write(
        RunLayout(run).quickstart_context_path,
        {"demo": True, "refused": refused, "service": {"kind": "remote", "lanes": ["cpu"], "gpu": False}},
    )
    result = build_result(run)
    text = _text(result, run)
    assert text.count(TRITON_NEEDS_GPU) == 1, text
    assert "replayed" not in text and "DEMO REPLAY" not in text
    assert not any("replayed" in note for note in result.notes)
    assert "Runner completed:      no (Refused after 0 of 3 turns)" in text
    assert result.kernel_correct is None  # nothing was evaluated: not counted against anyone


@pytest.mark.parametrize("summary", ["Interrupted", None])  # Ctrl-C wrote one; a kill left none
def test_a_stopped_run_reports_the_turns_it_made_and_how_to_continue(tmp_path, summary):
    run = _gpu_run(tmp_path, [0.5, None], exit_status=summary or "Interrupted")
    layout = RunLayout(run)
    if summary is None:
        layout.summary_path.unlink()
    else:
        written = json.loads(layout.summary_path.read_text()) | {"runner_completed": False}
        _write(layout.summary_path, written)
    _write(layout.trajectory_path, {"trajectory_format": "mini-swe-agent-1.1", "messages": [],
                                    "info": {"ptxbench": {"turns": 2}}})  # fmt: skip
    result = build_result(run)
    assert result.runner["turns"] == 2 and not result.runner_completed
    text = " ".join(_text(result, run).split())
    assert f"{summary or 'not finished'} after 2 of 3 turns" in text
    assert f"continue with: ptxbench quickstart --resume {run}" in text


def test_the_counts_of_kernels_are_named_as_counts(tmp_path):
    """``correct: 0`` beside ``kernel_correct: null`` read as a contradiction: the counts are one object."""
    run = _gpu_run(tmp_path, [None, 0.5])
    written = json.loads(build_result(run).model_dump_json())
    assert written["kernel_counts"] == {
        "generated": 2, "compiled": 0, "correct": 1, "not_executed": 0, "target_achieved": 0,
    }  # fmt: skip
    assert {"correct", "generated", "compiled", "not_executed", "target_achieved"}.isdisjoint(written)
    assert written["kernel_correct"] is True


def test_a_piped_report_keeps_each_turn_on_one_line(tmp_path):
    """Piped into a file or a log (no terminal, no COLUMNS), rich assumed 80 columns and folded the rows."""
    from mini_ptx_agent.cli import app
    from mini_ptx_agent.environment.report import StaticAnalysis
    from typer.testing import CliRunner

    run = _gpu_run(tmp_path, [0.5, 0.9, 1.02], exit_status="Submitted")
    path = RunLayout(run).trajectory_dir / "evaluations" / "turn_003.json"
    hopper = StaticAnalysis(compiled=True, sass_families=["HGMMA", "STSM", "SYNCS", "USETMAXREG", "UTMALDG"])
    _write(path, json.loads(path.read_text()) | {"static_analysis": hopper.model_dump(mode="json")})
    done = CliRunner().invoke(app, ["quickstart", "--report", str(run)], env={"COLUMNS": None})
    assert done.exit_code == 0, done.output
    (row,) = [line for line in done.output.splitlines() if line.startswith("3 ")]
    assert "PASSED" in row and "1.020x" in row and "HGMMA, STSM, SYNCS, USETMAXREG, UTMALDG" in row


def test_resume_of_a_run_that_is_no_quickstart_says_which_command_continues_it(tmp_path):
    from mini_ptx_agent.quickstart.run import resume_quickstart
    from mini_ptx_agent.quickstart.settings import QuickstartError, QuickstartSettings
    from mini_ptx_agent.task import TaskConfig

    run = tmp_path / "run-20260101T000000Z-triton-vector_add_f32"
    plan = RunPlan(
        run_id=run.name, created_at="2026-01-01T00:00:00+00:00", model="demo", prompt_tag="triton-hopper",
        task=TaskConfig(definition="vector_add_f32", language="triton"), num_turns=3, service="embedded",
    )  # fmt: skip
    _write(RunLayout(run).plan_path, plan.model_dump(mode="json"))
    with pytest.raises(QuickstartError, match=f"not a quickstart run .*ptxbench run --resume {run}"):
        resume_quickstart(run, QuickstartSettings.resolve(environ={}))
