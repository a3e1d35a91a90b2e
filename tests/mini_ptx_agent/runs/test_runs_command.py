"""`ptxbench run` end to end: the real command, an embedded CPU-mode FIBServe, a scripted model endpoint.

Checks the run directory layout, the summary's three facts, the evaluator log, resume with `--resume`, and
that no secret from the environment reaches any file the run wrote (including the embedded service's log).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_cli import ptxbench
from scripted_model import ScriptedOpenAIServer
from test_agent_loop import BAD_REPLY, GOOD, GOOD_REPLY, MODEL_ID, SECRETS, WORKLOAD

pytestmark = pytest.mark.slow


def test_run_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with ScriptedOpenAIServer(MODEL_ID, [BAD_REPLY, GOOD_REPLY]) as server:
        env = SECRETS | {"MODEL_NAME": MODEL_ID, "ACCRL_MODEL_HOST": server.host_port}
        result = ptxbench(
            "run", "--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD,
            "--num-turns", "2", "--output-root", str(out), "--json", env=env,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["exit_status"] == "LimitsExceeded" and summary["demo"] is False
    assert (summary["runner_completed"], summary["kernel_correct"], summary["target_met"]) == (
        True,
        True,
        False,
    )
    (run_dir,) = out.iterdir()
    assert run_dir.name.startswith("run-") and run_dir.name.endswith("-triton-vector_add_f32")
    expected = {
        "plan.json", "summary.json", "trajectories/exp_000.traj.json", "exp_000/kernel.py",
        "exp_000/evaluations/turn_001.json", "exp_000/evaluations/turn_002.json", "success/exp_000/kernel_v2.py",
        "logs/fibserve.log",
    }  # fmt: skip
    written = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()}
    assert written == expected
    plan = json.loads((run_dir / "plan.json").read_text())
    assert (
        plan["model"] == MODEL_ID and plan["prompt_tag"] == "triton-hopper" and plan["service"] == "embedded"
    )
    assert (run_dir / "success/exp_000/kernel_v2.py").read_text() == GOOD

    with ScriptedOpenAIServer(MODEL_ID, [GOOD_REPLY]) as server:
        env = SECRETS | {"ACCRL_MODEL_HOST": server.host_port}
        result = ptxbench("run", "--resume", str(run_dir), "--num-turns", "3", "--json", env=env)
        assert len(server.requests) == 1 and len(server.requests[0]["messages"]) == 6
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["resumed"] and summary["turns"] == 3 and summary["correct_versions"] == [2, 3]
    assert json.loads((run_dir / "plan.json").read_text())["num_turns"] == 3

    for path in run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for name, value in SECRETS.items():
                assert value not in text, f"{name} leaked into {path.relative_to(run_dir)}"


def test_model_not_configured_is_a_clear_usage_error(tmp_path: Path) -> None:
    result = ptxbench(
        "run", "--definition", "vector_add_f32", "--output-root", str(tmp_path / "runs"), env={}
    )
    assert result.returncode == 2
    assert "MODEL_NAME" in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
