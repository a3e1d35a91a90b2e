"""`ptxbench experiment run` end to end: a real FIBServe on 127.0.0.1 with two CPU lanes (the float32 CI
definitions under the Triton interpreter) and a scripted OpenAI-compatible server serving two model ids.

The main test runs 2 definitions x 2 prompt tags x 2 models x 3 turns (8 trajectories, 24 turns, 16 of them
real evaluations) at concurrency 4, stops the
runner with SIGINT a third of the way, resumes it and SIGKILLs it two thirds of the way, resumes it again, and
checks that every trajectory has exactly its turns (none lost, none asked twice once it was complete), that
the per-turn table matches the trajectories, and what the manifest records. A second test covers an outage
(the model host down: trajectories unfinished, then rerun) and `--extend-turns`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.experiments.directory import ExperimentLayout, load_experiment
from mini_ptx_agent.experiments.launch import run_experiment
from mini_ptx_agent.reports.inputs import read_turns_csv
from mini_ptx_agent.runs.turns import turn_rows
from mini_ptx_agent.trajectory import TrajectoryError, load_trajectory
from run_cli import CLEARED
from scripted_kernels import BROKEN_MODEL, GOOD_MODEL, RESPOND, turn_of
from scripted_model import ScriptedOpenAIServer

pytestmark = pytest.mark.slow

MODELS_CONFIG = {
    "retry": {"max_attempts": 1, "initial_backoff_s": 0.0, "request_timeout_s": 60},
    "families": [
        {
            "name": "priced",
            "match": [GOOD_MODEL],
            "pricing": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0},
        }
    ],
}
"""Fast failure for the outage test; a price for the good model only (the broken one's cost is unknown)."""


@pytest.fixture(scope="module")
def fibserve() -> Iterator[str]:
    with EmbeddedService(devices=["cpu", "cpu"]) as service:
        yield service.url


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(respond=RESPOND) as server:
        yield server


def write_config(path: Path, **fields) -> Path:
    config = {
        "name": "kill-resume", "definitions": ["vector_add_f32", "softmax_rows_f32"], "workloads": 1,
        "languages": ["triton"], "prompt_tags": ["triton-hopper", "triton-hopper-attention"],
        "models": [GOOD_MODEL, BROKEN_MODEL], "replicas": 1, "num_turns": 3, "concurrency": 4,
        "models_config": MODELS_CONFIG,
    } | fields  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return path


def complete_turns(root: Path) -> set[tuple[str, int]]:
    """(trajectory id, turn) of every turn whose feedback is in its trajectory file."""
    done = set()
    for path in (root / "runs").glob("*/trajectories/exp_000.traj.json"):
        try:
            messages = load_trajectory(path)["messages"]
        except (TrajectoryError, OSError):
            continue
        for message in messages:
            state = (message.get("extra") or {}).get("ptxbench") or {}
            if message["role"] == "user" and "turn" in state:
                done.add((path.parents[1].name, state["turn"]))
    return done


def exit_status(run_dir: Path) -> str | None:
    """The exit status in a trajectory's summary, None before it has one."""
    summary = run_dir / "summary.json"
    return json.loads(summary.read_text())["exit_status"] if summary.is_file() else None


def start(*args: str, env: dict[str, str]) -> subprocess.Popen:
    exe = Path(sys.executable).parent / "ptxbench"
    base = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"COLUMNS": "200"}
    return subprocess.Popen(
        [str(exe), "experiment", "run", *args], env=base | env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None, f"the runner ended early ({proc.returncode}): {proc.communicate()[0]}"
        assert time.monotonic() < deadline, "the runner made no progress in time"
        time.sleep(0.2)  # polling the files the runner writes: there is nothing to wait on instead


def asked_after(models: ScriptedOpenAIServer, mark: int, seeds: dict[int, str]) -> set[tuple[str, int]]:
    return {(seeds[body["seed"]], turn_of(body)) for _, body in models.answered[mark:]}


@pytest.mark.timeout(900)  # 20 evaluations on two CPU lanes: about a minute idle, several on a loaded machine
def test_sigint_then_sigkill_then_resume_runs_every_turn_once(
    fibserve: str, models: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    root = tmp_path / "experiment"
    config = write_config(tmp_path / "config.yaml")
    env = {"SERVICE_URL": fibserve, "ACCRL_MODEL_HOST": models.host_port}
    mark0 = len(models.answered)

    # 1. SIGINT a third of the way: no new trajectory, the running ones end at their next model call.
    proc = start(str(config), "--output", str(root), env=env)
    wait_until(lambda: len(complete_turns(root)) >= 8, proc)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=600)[0]
    assert proc.returncode == 130, output
    assert "stopping: no new trajectories" in output
    plan = load_experiment(root)
    seeds = {t.seed: t.id for t in plan.trajectories}
    # the running trajectories end at their next model call; one already in its last turn makes none and
    # ends by its turn limit (on a loaded machine the SIGINT can come when all of them are)
    interrupted = [
        t.id for t in plan.trajectories if exit_status(ExperimentLayout(root).run_dir(t.id)) == "Interrupted"
    ]
    assert output.count(": Interrupted") == len(interrupted), output
    first, mark1 = complete_turns(root), len(models.answered)
    assert 8 <= len(first) < 24 and (root / "turns.csv").is_file() and (root / "manifest.json").is_file()
    assert len(models.answered) - mark0 == len(first)  # a graceful stop loses no reply

    # 2. Resume, then SIGKILL two thirds of the way: turns in flight are lost, nothing else.
    proc = start("--resume", str(root), env=env)
    wait_until(lambda: len(complete_turns(root)) >= 16, proc)
    proc.kill()
    proc.communicate(timeout=60)
    second, mark2 = complete_turns(root), len(models.answered)
    assert first < second and len(second) < 24
    assert not asked_after(models, mark1, seeds) & first  # no complete turn asked again

    # 3. Resume to the end (in-process: the library call behind the command).
    result = run_experiment(resume_dir=root, service_url=fibserve, model_host=models.host_port)
    assert (result.finished, result.unfinished, result.interrupted) == (8, [], False)
    assert not asked_after(models, mark2, seeds) & second
    asked = Counter((seeds[b["seed"]], turn_of(b)) for _, b in models.answered[mark0:])
    assert set(asked) == {(t.id, n) for t in plan.trajectories for n in (1, 2, 3)}
    assert (
        sum(asked.values()) - 24 <= 4
    )  # only the SIGKILL's turns in flight (concurrency 4) were asked twice

    layout = ExperimentLayout(root)
    rows = []
    for t in plan.trajectories:
        run_dir = layout.run_dir(t.id)
        messages = load_trajectory(run_dir / "trajectories" / "exp_000.traj.json")["messages"]
        turns = [
            m["extra"]["ptxbench"]["turn"]
            for m in messages
            if m["role"] == "user" and "ptxbench" in m.get("extra", {})
        ]
        assert turns == [1, 2, 3], t.id
        assert [m["role"] for m in messages][-1] == "exit"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert (summary["exit_status"], summary["turns"]) == ("LimitsExceeded", 3)
        assert summary["kernel_correct"] is (t.model == GOOD_MODEL)
        evaluated = sorted(p.name for p in (run_dir / "exp_000" / "evaluations").iterdir())
        assert evaluated == (["turn_001.json", "turn_002.json", "turn_003.json"] if t.model == GOOD_MODEL
                             else ["turn_002.json", "turn_003.json"])  # fmt: skip
        rows += turn_rows(run_dir, experiment=plan.name, trajectory=t.id, replica=t.replica)

    table = read_turns_csv(root / "turns.csv")
    assert table == rows and len(table) == 24
    import pyarrow.parquet as pq

    parquet = pq.read_table(root / "turns.parquet").to_pylist()
    assert [(r["trajectory"], r["turn"], r["failure_class"]) for r in parquet] == [
        (r.trajectory, r.turn, r.failure_class) for r in rows
    ]
    assert parquet[0]["speedups"] == list(rows[0].speedups.items())
    classes = Counter((r.model, r.failure_class) for r in rows)
    assert classes == {
        (GOOD_MODEL, "PASSED"): 12,
        (BROKEN_MODEL, "format"): 4,
        (BROKEN_MODEL, "compile"): 4,
        (BROKEN_MODEL, "incorrect"): 4,
    }

    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["config_hash"] == plan.config_hash and manifest["totals"]["turns"] == 24
    assert manifest["service"]["health"]["version"] and manifest["service"]["lanes"] == 2
    assert (
        manifest["service"]["traces"]["hardware"] == ["cpu"]
        and "triton" in manifest["service"]["traces"]["libs"]
    )
    assert set(manifest["models"]) == {GOOD_MODEL, BROKEN_MODEL}
    assert manifest["models"][GOOD_MODEL]["config"]["pricing"]["input_usd_per_mtok"] == 1.0
    entries = {e["id"]: e for e in manifest["trajectories"]}
    for t in plan.trajectories:
        entry = entries[t.id]
        assert (
            entry["turns"] == 3
            and entry["seed"] == t.seed
            and entry["tokens_in"] > 0
            and entry["wall_time_s"] > 0
        )
        assert (
            isinstance(entry["cost_usd"], float) if t.model == GOOD_MODEL else entry["cost_usd"] == "unknown"
        )
    assert manifest["totals"]["cost_usd"] == "unknown"


def test_an_outage_is_rerun_and_extend_turns_continues_from_the_saved_context(
    fibserve: str, models: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    from mini_ptx_agent.environment.embedded import free_port
    from mini_ptx_agent.experiments.config import load_config

    root = tmp_path / "experiment"
    config = load_config(write_config(
        tmp_path / "c.yaml", name="extend", definitions=["vector_add_f32"], prompt_tags=["triton-hopper"],
        models=[BROKEN_MODEL], replicas=1, num_turns=1, concurrency=1,
    ))  # fmt: skip
    down = run_experiment(config, output=root, service_url=fibserve, model_host=f"127.0.0.1:{free_port()}")
    (tid,) = down.unfinished
    summary = json.loads((root / "runs" / tid / "summary.json").read_text())
    assert (
        summary["exit_status"] == "InfrastructureError" and "model API unavailable" in summary["exit_message"]
    )

    mark = len(models.answered)
    again = run_experiment(resume_dir=root, service_url=fibserve, model_host=models.host_port)
    assert again.finished == 1 and [turn_of(b) for _, b in models.answered[mark:]] == [1]

    mark = len(models.answered)
    longer = run_experiment(
        resume_dir=root, extend_turns=1, service_url=fibserve, model_host=models.host_port
    )
    assert longer.finished == 1 and load_experiment(root).num_turns == 2
    ((_, body),) = models.answered[mark:]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]  # turn 1 kept
    assert body["messages"][-1]["content"].startswith("FORMAT ERROR")
    assert [(r.turn, r.failure_class) for r in read_turns_csv(root / "turns.csv")] == [
        (1, "format"),
        (2, "compile"),
    ]
