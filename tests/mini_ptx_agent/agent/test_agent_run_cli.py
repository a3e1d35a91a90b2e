"""`ptxbench run` against a model host that accepts a request and never answers: the command still exits.

The real console script runs against one CPU-mode FIBServe on 127.0.0.1 (shared by the module) and a
scripted OpenAI-compatible server that answers ``GET /v1/models`` but holds every chat completion open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.service import EmbeddedService
from run_cli import ptxbench
from scripted_model import ScriptedOpenAIServer
from test_agent_loop import MODEL_ID, WORKLOAD

pytestmark = pytest.mark.slow

EXIT_BOUND_S = 60.0
"""Longest the whole command may take with a 3 s turn timeout (start-up, one definition fetch, the wait, exit);
before the fix it lived until the 900 s HTTP timeout."""


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


def test_a_hung_model_host_ends_the_run_at_the_turn_timeout(service_url: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with ScriptedOpenAIServer(MODEL_ID, [], never_answer=True) as server:
        env = {"MODEL_NAME": MODEL_ID, "ACCRL_MODEL_HOST": server.host_port}
        started = time.monotonic()
        done = ptxbench(
            "run", "--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD,
            "--num-turns", "2", "--turn-timeout", "3", "--service-url", service_url, "--output-root", str(out),
            "--json", env=env, timeout=EXIT_BOUND_S * 2,
        )  # fmt: skip
        elapsed = time.monotonic() - started
        assert len(server.requests) == 1  # the request was made and held open
    assert done.returncode == 2, done.stderr
    assert elapsed < EXIT_BOUND_S, f"the command took {elapsed:.1f} s to exit"
    summary = json.loads(done.stdout)
    assert summary["exit_status"] == "InfrastructureError" and not summary["runner_completed"]
    assert "no answer within the turn timeout of 3 s" in summary["infrastructure_error"]
    (run_dir,) = out.iterdir()
    assert json.loads((run_dir / "summary.json").read_text()) == summary


def test_the_wall_time_limit_bounds_a_model_call(service_url: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with ScriptedOpenAIServer(MODEL_ID, [], never_answer=True) as server:
        env = {"MODEL_NAME": MODEL_ID, "ACCRL_MODEL_HOST": server.host_port}
        started = time.monotonic()
        done = ptxbench(
            "run", "--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD,
            "--wall-time", "3", "--service-url", service_url, "--output-root", str(out), "--json",
            env=env, timeout=EXIT_BOUND_S * 2,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < EXIT_BOUND_S, f"the command took {elapsed:.1f} s to exit"
    summary = json.loads(done.stdout)
    assert summary["exit_status"] == "TimeExceeded" and summary["runner_completed"]
    assert "wall time limit" in summary["exit_message"]
