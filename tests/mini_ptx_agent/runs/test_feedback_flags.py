"""`ptxbench run`'s feedback flags: recorded in plan.json, kept on resume (the sanitizer gate may change).

In-process through typer's CliRunner. The service URL points at a closed port, so each run stops at its first
request as ``InfrastructureError`` after writing plan.json; the model is a replay of a tiny trajectory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mini_ptx_agent.cli import app
from mini_ptx_agent.runs.directory import RunPlan
from typer.testing import CliRunner

DEAD_SERVICE = "http://127.0.0.1:9"


@pytest.fixture
def ptxbench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("MODEL_NAME", "SERVICE_URL", "ACCRL_MODEL_HOST", "DATASET_ROOTS"):
        monkeypatch.delenv(name, raising=False)
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "t"}, {"role": "assistant", "content": "x"}]}))  # fmt: skip

    def run(*args: str):
        runner = CliRunner()
        return runner.invoke(
            app, ["run", *args, "--model", f"replay:{replay}", "--service-url", DEAD_SERVICE]
        )

    return run


def plan_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "plan.json").read_text())


def new_run(ptxbench, out: Path, *flags: str) -> Path:
    done = ptxbench(
        "--definition", "vector_add_f32", "--language", "triton", "--output-root", str(out), *flags
    )
    assert done.exit_code == 2, done.output  # the closed port: InfrastructureError, after plan.json
    (run_dir,) = out.iterdir()
    return run_dir


def test_every_flag_lands_in_plan_json(ptxbench, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A note\nbody\n")
    run_dir = new_run(
        ptxbench, tmp_path / "runs", "--context-policy", "single-user", "--sanitizer-tools", "memcheck,racecheck",
        "--no-architecture-warning", "--require-architecture", "--instruction-evidence", "--profile",
        "--notes-dir", str(notes),
    )  # fmt: skip
    plan = plan_of(run_dir)
    assert plan["feedback"] == {
        "context_policy": "single-user", "sanitizer_gate": ["memcheck", "racecheck"], "architecture_warning": False,
        "require_architecture": True, "instruction_evidence": True, "profile_in_loop": True,
        "notes_dir": str(notes.resolve()),
    }  # fmt: skip
    assert (plan["task"]["sanitizer"], plan["task"]["sanitizer_types"]) == (True, ["memcheck", "racecheck"])


def test_defaults_are_the_plain_loop(ptxbench, tmp_path: Path) -> None:
    plan = plan_of(new_run(ptxbench, tmp_path / "runs"))
    assert plan["feedback"] == {
        "context_policy": "full", "sanitizer_gate": [], "architecture_warning": True, "require_architecture": False,
        "instruction_evidence": False, "profile_in_loop": False, "notes_dir": None,
    }  # fmt: skip
    assert plan["task"]["sanitizer"] is False
    plan = plan_of(new_run(ptxbench, tmp_path / "other", "--sanitizer"))
    assert plan["feedback"]["sanitizer_gate"] == ["memcheck"] and plan["task"]["sanitizer"] is True


def test_resume_keeps_the_feedback_options_and_may_change_the_sanitizer_gate(
    ptxbench, tmp_path: Path
) -> None:
    run_dir = new_run(
        ptxbench, tmp_path / "runs", "--context-policy", "latest-pair", "--profile", "--notes-dir", "bundled"
    )
    before = plan_of(run_dir)
    for flag, says in (
        (["--context-policy", "full"], "--context-policy full: this run was made with latest-pair"),
        (["--no-profile"], "--profile off: this run was made with on"),
        (["--instruction-evidence"], "--instruction-evidence on: this run was made with off"),
        (
            ["--notes-dir", str(tmp_path)],
            f"--notes-dir {tmp_path}: notes folder {tmp_path} holds no *.md notes",
        ),
    ):
        refused = ptxbench("--resume", str(run_dir), *flag)
        assert refused.exit_code == 2 and says in " ".join(refused.output.split()), refused.output
        assert plan_of(run_dir) == before
    same = ptxbench(
        "--resume", str(run_dir), "--context-policy", "latest-pair", "--profile", "--notes-dir", "bundled"
    )
    assert "this run was made with" not in same.output and plan_of(run_dir)["feedback"] == before["feedback"]

    ptxbench("--resume", str(run_dir), "--sanitizer-tools", "memcheck,synccheck")
    plan = plan_of(run_dir)
    assert plan["feedback"] == before["feedback"] | {"sanitizer_gate": ["memcheck", "synccheck"]}
    assert (plan["task"]["sanitizer"], plan["task"]["sanitizer_types"]) == (True, ["memcheck", "synccheck"])
    ptxbench("--resume", str(run_dir), "--no-sanitizer")
    plan = plan_of(run_dir)
    assert plan["feedback"]["sanitizer_gate"] == [] and plan["task"]["sanitizer"] is False


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--no-sanitizer", "--sanitizer-tools", "racecheck"], "--no-sanitizer and --sanitizer-tools contradict"),
        (["--sanitizer-tools", "leakcheck"], "--sanitizer-tools: Input should be 'memcheck', 'racecheck'"),
        (["--notes-dir", "/nonexistent/notes"], "--notes-dir /nonexistent/notes: notes folder /nonexistent/notes does not exist"),
        (["--context-policy", "latest"], "'latest' is not one of"),
    ],
)  # fmt: skip
def test_bad_feedback_flags_are_refused_before_anything_is_created(
    ptxbench, tmp_path: Path, flags: list[str], says: str
) -> None:
    out = tmp_path / "runs"
    done = ptxbench(
        "--definition", "vector_add_f32", "--language", "triton", "--output-root", str(out), *flags
    )
    assert done.exit_code == 2 and says in " ".join(done.output.split()), done.output
    assert not out.exists()


def test_a_plan_written_before_feedback_options_keeps_its_sanitizer() -> None:
    old = {
        "run_id": "r", "created_at": "2026-11-30T07:00:00+00:00", "model": "m", "prompt_tag": "triton-hopper",
        "num_turns": 3, "service": "embedded",
        "task": {"definition": "vector_add_f32", "language": "triton", "sanitizer": True, "sanitizer_types": ["racecheck"]},
    }  # fmt: skip
    plan = RunPlan.model_validate(old)
    assert plan.feedback.sanitizer_gate == ["racecheck"] and plan.feedback.context_policy == "full"
    gated = RunPlan.model_validate(
        old | {"task": {"definition": "vector_add_f32"}, "feedback": {"sanitizer_gate": ["memcheck"]}}
    )
    assert gated.task.sanitizer is True and gated.task.sanitizer_types == ["memcheck"]
