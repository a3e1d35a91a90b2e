"""`ptxbench run`'s command line: limits that end a run, options checked before anything starts, resume.

The real console script runs against one CPU-mode FIBServe on 127.0.0.1 (shared by the module, passed with
``--service-url``) and scripted OpenAI-compatible servers; the option checks need no service at all.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService
from run_cli import ptxbench
from scripted_model import ScriptedOpenAIServer
from test_agent_loop import BAD_REPLY, GOOD_REPLY, MODEL_ID, WORKLOAD

pytestmark = pytest.mark.slow

EXIT_BOUND_S = 60.0
"""Longest the whole command may take with a 3 s turn timeout (start-up, one definition fetch, the wait, exit);
before the fix it lived until the 900 s HTTP timeout."""


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


def run_against_a_hung_host(service_url: str, out: Path, *limits: str) -> tuple[int, dict, int]:
    """`ptxbench run --json` with ``limits`` against a model host that never answers; checks it exited within
    :data:`EXIT_BOUND_S`. Returns the exit code, the printed summary and the requests the host received."""
    with ScriptedOpenAIServer(MODEL_ID, [], never_answer=True) as server:
        env = {"MODEL_NAME": MODEL_ID, "ACCRL_MODEL_HOST": server.host_port}
        started = time.monotonic()
        done = ptxbench(
            "run", "--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD, *limits,
            "--service-url", service_url, "--output-root", str(out), "--json", env=env, timeout=EXIT_BOUND_S * 2,
        )  # fmt: skip
        elapsed = time.monotonic() - started
        requests = len(server.requests)
    assert elapsed < EXIT_BOUND_S, f"the command took {elapsed:.1f} s to exit"
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), requests


def test_a_hung_model_host_ends_the_run_at_the_turn_timeout(service_url: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    limits = ("--num-turns", "2", "--turn-timeout", "3")
    code, summary, requests = run_against_a_hung_host(service_url, out, *limits)
    assert code == 2 and requests == 1  # the request was made and held open
    assert summary["exit_status"] == "InfrastructureError" and not summary["runner_completed"]
    assert "no answer within the turn timeout of 3 s" in summary["infrastructure_error"]
    (run_dir,) = out.iterdir()
    assert json.loads((run_dir / "summary.json").read_text()) == summary


def test_the_wall_time_limit_bounds_a_model_call(service_url: str, tmp_path: Path) -> None:
    code, summary, _ = run_against_a_hung_host(service_url, tmp_path / "runs", "--wall-time", "3")
    assert code == 0 and summary["exit_status"] == "TimeExceeded" and summary["runner_completed"]
    assert "wall time limit" in summary["exit_message"]


def _no_run_directory(root: Path) -> bool:
    return not root.exists() or not any(root.iterdir())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--definition", "gemm_n7168"], "did you mean gemm_n256_k7168, gemm_n7168_k5120"),
        (["--definition", "gemm_n7168_k5120", "--workloads", "94920358-01a8-4c5b-9209-3103fd490e9"],
         "did you mean 94920358-01a8-4c5b-9209-3103fd490e94?"),
        (["--definition", "gemm_n7168_k5120", "--prompt-tag", "triton-hopper"],
         "tags that fit: hopper-abi-only, hopper-cluster-multicast,"),
        (["--definition", "gemm_n7168_k5120", "--target-speedup", "0"], "--target-speedup: Input should be greater"),
        (["--language", "cud", "--definition", "gemm_n7168_k5120"], "'cud' is not one of 'cuda', 'triton'"),
        (["--arch", "sm_80", "--definition", "gemm_n7168_k5120"], "'sm_80' is not one of 'sm_90a', 'sm_100a'"),
    ],
)  # fmt: skip
def test_bad_options_are_refused_before_anything_is_created(
    tmp_path: Path, args: list[str], says: str
) -> None:
    out = tmp_path / "runs"
    done = ptxbench("run", *args, "--model", "replay:unused.json", "--output-root", str(out), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in " ".join(done.stderr.split()), done.stderr
    assert "pydantic" not in done.stderr and "Traceback" not in done.stderr
    assert _no_run_directory(out)


def test_resume_of_a_missing_directory_says_it_does_not_exist(tmp_path: Path) -> None:
    done = ptxbench("run", "--resume", str(tmp_path / "run-nothere"), timeout=120)
    assert done.returncode == 2
    assert f"run directory {tmp_path / 'run-nothere'} does not exist" in done.stderr
    done = ptxbench("run", "--resume", str(tmp_path), timeout=120)
    assert done.returncode == 2 and "is not a run directory: plan.json is missing" in done.stderr


def test_a_model_litellm_does_not_know_is_refused_before_the_service_starts(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    done = ptxbench(
        "run", "--definition", "vector_add_f32", "--language", "triton", "--model", "nonsense-model-xyz",
        "--output-root", str(out), timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "does not know model 'nonsense-model-xyz'" in done.stderr and "ACCRL_MODEL_HOST" in done.stderr
    assert "rejected the request" not in done.stderr  # no request was made
    assert _no_run_directory(out)


def test_resume_keeps_the_plan_unless_an_option_is_given(service_url: str, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    common = ["--service-url", service_url, "--json"]
    with ScriptedOpenAIServer(MODEL_ID, [BAD_REPLY]) as server:
        env = {"MODEL_NAME": MODEL_ID, "ACCRL_MODEL_HOST": server.host_port}
        first = ptxbench(
            "run", "--definition", "vector_add_f32", "--language", "triton", "--workloads", WORKLOAD,
            "--num-turns", "1", "--turn-timeout", "120", "--output-root", str(out), *common, env=env,
        )  # fmt: skip
    assert first.returncode == 0, first.stderr
    # One progress line per turn, on stderr with --json, plain because the output is piped.
    (line,) = [x for x in first.stderr.splitlines() if x.strip().startswith("turn ")]
    assert re.fullmatch(r"  turn 1/1: INCORRECT_NUMERICAL; \d+\.\d s", line), line
    assert "\x1b[" not in first.stderr
    (run_dir,) = out.iterdir()
    plan_before = json.loads((run_dir / "plan.json").read_text())

    with ScriptedOpenAIServer(MODEL_ID, [GOOD_REPLY]) as server:
        env = {"ACCRL_MODEL_HOST": server.host_port}
        again = ptxbench("run", "--resume", str(run_dir), *common, env=env)
        assert again.returncode == 0, again.stderr
        assert server.requests == []  # the plan's single turn was made already: nothing to continue
        assert json.loads((run_dir / "plan.json").read_text()) == plan_before
        assert json.loads(again.stdout)["turns"] == 1

        refused = ptxbench("run", "--resume", str(run_dir), "--language", "cuda", *common, env=env)
        assert refused.returncode == 2 and "--language cuda: this run was made with triton" in refused.stderr
        fewer = ptxbench("run", "--resume", str(run_dir), "--num-turns", "0", *common, env=env)
        assert fewer.returncode == 2 and "--num-turns" in fewer.stderr

        extended = ptxbench(
            "run", "--resume", str(run_dir), "--num-turns", "2", "--turn-timeout", "60", *common, env=env
        )
        assert extended.returncode == 0, extended.stderr
        assert "turn 2/2: PASSED" in extended.stderr  # the resumed run numbers its turns on
        assert len(server.requests) == 1
    plan = json.loads((run_dir / "plan.json").read_text())
    assert (plan["num_turns"], plan["turn_timeout_s"]) == (2, 60)
    assert {k: v for k, v in plan.items() if k not in ("num_turns", "turn_timeout_s")} == {
        k: v for k, v in plan_before.items() if k not in ("num_turns", "turn_timeout_s")
    }
    assert json.loads(extended.stdout)["correct_versions"] == [2]
