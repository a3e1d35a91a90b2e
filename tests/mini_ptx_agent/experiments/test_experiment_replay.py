"""Experiments of replays: the shipped ``ci-smoke`` config (the demo, no key), a replay extended turn by turn,
and a replay shorter than the turns asked for (finished, not "to continue").

The real console script runs against one CPU-mode FIBServe on 127.0.0.1 (``vector_add_f32`` in Triton under
the interpreter).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.trajectory import load_trajectory, write_json
from run_cli import ptxbench
from test_agent_loop import BAD_REPLY, GOOD_REPLY

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


def _run_dir(root: Path) -> Path:
    (run_dir,) = (root / "runs").iterdir()
    return run_dir


def _turns(run_dir: Path) -> tuple[list[str], list[str]]:
    """(the replies, the evaluated statuses) of the trajectory in ``run_dir``."""
    messages = load_trajectory(run_dir / "trajectories" / "exp_000.traj.json")["messages"]
    statuses = [
        json.loads(p.read_text())["status"]
        for p in sorted((run_dir / "exp_000" / "evaluations").glob("*.json"))
    ]
    return [m["content"] for m in messages if m["role"] == "assistant"], statuses


def test_the_shipped_ci_smoke_config_runs_the_demo_without_a_key(service_url: str, tmp_path: Path) -> None:
    done = ptxbench(
        "experiment", "run", "ci-smoke", "--output", str(tmp_path / "ci"), "--service-url", service_url
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1/1 trajectories finished" in done.stdout
    replies, statuses = _turns(_run_dir(tmp_path / "ci"))
    assert statuses == ["INCORRECT_NUMERICAL", "PASSED"] and len(replies) == 2
    manifest = json.loads((tmp_path / "ci" / "manifest.json").read_text())
    assert manifest["models"]["demo"]["demo"] is True  # never a model's result


def test_a_replay_extended_turn_by_turn_replays_each_reply_once(service_url: str, tmp_path: Path) -> None:
    recording = tmp_path / "recorded.traj.json"
    write_json(recording, {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": [
        {"role": "assistant", "content": BAD_REPLY}, {"role": "assistant", "content": GOOD_REPLY},
    ]})  # fmt: skip
    config = tmp_path / "replay.yaml"
    config.write_text(yaml.safe_dump({
        "name": "replay", "definitions": ["vector_add_f32"], "workloads": 1, "languages": ["triton"],
        "prompt_tags": ["triton-hopper"], "models": [f"replay:{recording}"], "num_turns": 1,
    }))  # fmt: skip
    root = tmp_path / "experiment"
    first = ptxbench("experiment", "run", str(config), "--output", str(root), "--service-url", service_url)
    assert first.returncode == 0, first.stdout + first.stderr
    resume = ("experiment", "run", "--resume", str(root), "--service-url", service_url, "--extend-turns")
    second = ptxbench(*resume, "1")
    assert second.returncode == 0, second.stdout + second.stderr
    # Turn 2 is the recording's second reply, not its first again.
    assert _turns(_run_dir(root)) == ([BAD_REPLY, GOOD_REPLY], ["INCORRECT_NUMERICAL", "PASSED"])

    # Two more turns than the recording has replies: it runs out, and the trajectory ended by its rule.
    third = ptxbench(*resume, "2")
    assert third.returncode == 0, third.stdout + third.stderr
    assert "1/1 trajectories finished" in third.stdout and "--resume" not in third.stdout
    summary = json.loads((_run_dir(root) / "summary.json").read_text())
    assert (summary["exit_status"], summary["runner_completed"], summary["turns"], summary["num_turns"]) == (
        "LimitsExceeded", True, 2, 4,
    )  # fmt: skip
    assert _turns(_run_dir(root))[0] == [BAD_REPLY, GOOD_REPLY]  # no bogus turn
    again = ptxbench(*resume, "0")  # nothing left to do
    assert again.returncode == 0 and "1/1 trajectories finished" in again.stdout
