"""Stopping and continuing `ptxbench run`: the demo without a key or a GPU, replays that resume where they were,
Ctrl-C that says how to continue, and a model endpoint that continues from there.

The real console script runs against one CPU-mode FIBServe on 127.0.0.1 (shared by the module, passed with
``--service-url``): ``vector_add_f32`` in Triton under the interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.demo import demo_trajectory
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.trajectory import load_trajectory, write_json
from run_cli import CLEARED, ptxbench
from scripted_model import ScriptedOpenAIServer
from test_agent_loop import BAD, BAD_REPLY, GOOD_REPLY, MODEL_ID, WORKLOAD

pytestmark = pytest.mark.slow

DEMO = ("--definition", "vector_add_f32", "--language", "triton", "--model", "demo")


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


def _statuses(run_dir: Path) -> list[str]:
    return [
        json.loads(p.read_text())["status"]
        for p in sorted((run_dir / "exp_000" / "evaluations").glob("*.json"))
    ]


def _replies(run_dir: Path) -> list[str]:
    messages = load_trajectory(run_dir / "trajectories" / "exp_000.traj.json")["messages"]
    return [m["content"] for m in messages if m["role"] == "assistant"]


def test_the_demo_runs_on_a_cpu_without_a_key_and_resumes_at_its_next_reply(service_url: str, tmp_path: Path):
    out = tmp_path / "runs"
    first = ptxbench(
        "run", *DEMO, "--num-turns", "1", "--service-url", service_url, "--output-root", str(out)
    )
    assert first.returncode == 0, first.stderr
    (run_dir,) = out.iterdir()
    lines = first.stdout.splitlines()
    assert lines[0] == f"run directory: {run_dir}"  # before anything else, so a stopped run still says where
    assert "DEMO REPLAY" in lines[1] and "not a model's result" in lines[1]
    assert "turn 1/1: INCORRECT_NUMERICAL" in first.stdout and _statuses(run_dir) == ["INCORRECT_NUMERICAL"]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert (plan["model"], plan["demo"]) == ("demo", True)

    # The plan's model is resolved again on resume: the demo's second reply, the masked kernel, passes.
    again = ptxbench("run", "--resume", str(run_dir), "--num-turns", "2", "--service-url", service_url)
    assert again.returncode == 0, again.stderr
    assert "turn 2/2: PASSED" in again.stdout and _statuses(run_dir) == ["INCORRECT_NUMERICAL", "PASSED"]
    recorded = [
        m["content"]
        for m in demo_trajectory("triton", "vector_add_f32")["messages"]
        if m["role"] == "assistant"
    ]
    assert _replies(run_dir) == recorded
    # The demo has no third reply: asked for one, the run ends by its rule with the two turns it made.
    last = ptxbench(
        "run", "--resume", str(run_dir), "--num-turns", "3", "--service-url", service_url, "--json"
    )
    summary = json.loads(last.stdout)
    assert (summary["exit_status"], summary["turns"], summary["num_turns"]) == ("LimitsExceeded", 2, 3)
    assert summary["runner_completed"] and "replay exhausted" in summary["exit_message"]


def test_a_resumed_replay_continues_with_the_reply_after_the_last_one_used(service_url: str, tmp_path: Path):
    recording = tmp_path / "recorded.traj.json"
    write_json(recording, {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": [
        {"role": "assistant", "content": BAD_REPLY}, {"role": "assistant", "content": GOOD_REPLY},
    ]})  # fmt: skip
    out = tmp_path / "runs"
    args = ("--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD)
    first = ptxbench("run", *args, "--model", f"replay:{recording}", "--num-turns", "1", "--service-url",
                     service_url, "--output-root", str(out))  # fmt: skip
    assert first.returncode == 0, first.stderr
    (run_dir,) = out.iterdir()
    again = ptxbench("run", "--resume", str(run_dir), "--num-turns", "2", "--service-url", service_url)
    assert again.returncode == 0, again.stderr
    # Turn 2 is the recording's second reply (it was its first again: the fixed kernel never ran).
    assert _replies(run_dir) == [BAD_REPLY, GOOD_REPLY]
    assert _statuses(run_dir) == ["INCORRECT_NUMERICAL", "PASSED"]


def test_ctrl_c_says_how_to_continue_and_continuing_works(service_url: str, tmp_path: Path):
    out = tmp_path / "runs"
    exe = Path(sys.executable).parent / "ptxbench"
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"COLUMNS": "200"}
    with ScriptedOpenAIServer(MODEL_ID, [BAD_REPLY], hang_after=1) as server:
        proc = subprocess.Popen(
            [str(exe), "run", "--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD,
             "--model", MODEL_ID, "--num-turns", "3", "--service-url", service_url, "--output-root", str(out)],
            env=env | {"ACCRL_MODEL_HOST": server.host_port}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while len(server.requests) < 2:  # turn 1 evaluated, turn 2's request held open by the host
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "turn 2 was never asked for"
            time.sleep(0.1)  # the request arrives over HTTP: nothing to wait on but the server's record
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    (run_dir,) = out.iterdir()
    assert proc.returncode == 130, stderr
    assert stdout.splitlines()[0] == f"run directory: {run_dir}"
    assert f"continue with: ptxbench run --resume {run_dir}" in " ".join(stderr.split())
    assert "Traceback" not in stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["exit_status"], summary["runner_completed"], summary["turns"]) == (
        "Interrupted",
        False,
        1,
    )

    with ScriptedOpenAIServer(MODEL_ID, [GOOD_REPLY]) as server:
        again = ptxbench("run", "--resume", str(run_dir), "--num-turns", "2", "--service-url", service_url,
                         env={"ACCRL_MODEL_HOST": server.host_port})  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 1 and server.requests[0]["messages"][2]["content"].count(BAD) == 1
    assert _statuses(run_dir) == ["INCORRECT_NUMERICAL", "PASSED"]
    assert json.loads((run_dir / "summary.json").read_text())["exit_status"] == "LimitsExceeded"
