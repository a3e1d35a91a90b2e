"""The whole kernel-agent loop against real parts: FIBServe in CPU mode and a scripted OpenAI-compatible server.

FIBServe runs as a real `fibserve serve --devices cpu` child process on 127.0.0.1 (Triton float32 under the
interpreter); the model is the real OpenAIEndpointModel talking HTTP to a scripted server with prepared replies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService, free_port
from mini_ptx_agent.environment.fibserve import FIBServeBackend
from mini_ptx_agent.models import make_model
from mini_ptx_agent.models.config import RetryPolicy
from mini_ptx_agent.runs.directory import RunLayout, RunPlan
from mini_ptx_agent.runs.launch import run_trajectory
from mini_ptx_agent.task import TaskConfig
from mini_ptx_agent.trajectory import load_trajectory
from scripted_model import ScriptedOpenAIServer
from test_agent_trajectory import inspect_with_minisweagent

pytestmark = pytest.mark.slow

DEFINITION = "vector_add_f32"
WORKLOAD = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"  # N = 1024 in the bundled CI trace set
MODEL_ID = "scripted/kernel-writer"

GOOD = """\
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(x, y, z):
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
"""
BAD = GOOD.replace("+ tl.load(y_ptr", "- tl.load(y_ptr")

NO_CODE = "I will first think about the memory layout; a kernel follows next turn."
BAD_REPLY = f"Draft:\n```python\n# not this one\n```\nFinal:\n```python\n{BAD}```\n"
GOOD_REPLY = f"Fixed the sign.\n```python\n{GOOD}```\n"

SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai-SECRET-0123456789",
    "ANTHROPIC_API_KEY": "sk-ant-test-SECRET-9876543210",
    "FIBSERVE_TOKEN": "fibserve-test-SECRET-token-42",
    "ACCRL_MODEL_API_KEY": "endpoint-test-SECRET-bearer-7",
    "HF_TOKEN": "hf_test_SECRET_abcdefghijkl",
}
FAST_RETRY = RetryPolicy(max_attempts=2, initial_backoff_s=0.05, request_timeout_s=30)


@pytest.fixture(scope="module")
def fibserve() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def plan_for(run_id: str, num_turns: int = 3) -> RunPlan:
    task = TaskConfig(
        definition=DEFINITION, language="triton", workloads=[WORKLOAD], target_speedup=1.0, timeout_s=120
    )
    return RunPlan(
        run_id=run_id, created_at="2026-11-30T07:00:00+00:00", task=task, model=MODEL_ID, prompt_tag="triton-hopper",
        num_turns=num_turns, turn_timeout_s=300, service="test",
    )  # fmt: skip


def endpoint_model(server: ScriptedOpenAIServer):
    return make_model(MODEL_ID, model_host=server.host_port, retry=FAST_RETRY)


def all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_three_turns_format_error_failing_and_passing_kernel(
    fibserve: str, secrets: dict, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(MODEL_ID, [NO_CODE, BAD_REPLY, GOOD_REPLY]) as server:
        summary = run_trajectory(
            plan_for("loop"), run_dir, backend=FIBServeBackend(fibserve), model=endpoint_model(server)
        )

    # CPU mode: correct, but never "target met" without a GPU measurement.
    assert summary.exit_status == "LimitsExceeded"
    assert (summary.runner_completed, summary.kernel_correct, summary.target_met) == (True, True, False)
    assert summary.turns == 3 and summary.correct_versions == [3]

    layout = RunLayout(run_dir)
    trajectory = load_trajectory(layout.trajectory_path)
    messages = trajectory["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "exit",
    ]
    assert trajectory["info"]["exit_status"] == "LimitsExceeded"
    assert trajectory["info"]["ptxbench"]["versions"] == [3]

    system, task_message = messages[0]["content"], messages[1]["content"]
    assert "Triton" in system
    definition_json = task_message.split("```json\n", 1)[1].split("\n```", 1)[0]
    definition = json.loads(definition_json)
    assert definition["name"] == DEFINITION and "tags" not in definition

    format_error, failing, passing = messages[3]["content"], messages[5]["content"], messages[7]["content"]
    assert format_error.startswith("FORMAT ERROR: no complete ```py or ```python code block")
    assert messages[3]["extra"]["interrupt_type"] == "FormatError"
    assert (
        failing.splitlines()[0]
        == f"Evaluation of your kernel (triton, definition {DEFINITION}), turn 2: INCORRECT_NUMERICAL"
    )
    assert "INCORRECT_NUMERICAL; max abs error" in failing
    assert "elements outside atol" in failing  # the evaluator's error log is quoted
    assert failing.splitlines()[-1].startswith("VERDICT: INCORRECT: 1 of 1 workloads failed")
    assert messages[5]["extra"]["ptxbench"]["status"] == "INCORRECT_NUMERICAL"
    assert "PASSED; not timed (cpu: correctness only)" in passing
    assert passing.splitlines()[-1].startswith("VERDICT: CORRECT (not timed on a GPU)")
    assert messages[7]["extra"]["ptxbench"]["all_passed"] is True
    assert messages[7]["extra"]["ptxbench"]["executed_on_gpu"] is False

    # The model saw each feedback, and the endpoint received the bearer token from ACCRL_MODEL_API_KEY.
    last_request = server.requests[-1]["messages"]
    assert last_request[-1]["content"] == failing and last_request[-3]["content"] == format_error
    assert server.headers[0].get("Authorization") == f"Bearer {SECRETS['ACCRL_MODEL_API_KEY']}"

    assert (layout.trajectory_dir / "kernel.py").read_text() == GOOD
    assert [p.name for p in layout.success_dir.iterdir()] == ["kernel_v3.py"]
    assert (layout.success_dir / "kernel_v3.py").read_text() == GOOD
    assert sorted(p.name for p in (layout.trajectory_dir / "evaluations").iterdir()) == [
        "turn_002.json",
        "turn_003.json",
    ]
    evaluation = json.loads((layout.trajectory_dir / "evaluations" / "turn_003.json").read_text())
    assert evaluation["schema"] == "ptxbench.eval.v1" and evaluation["status"] == "PASSED"
    assert json.loads(layout.plan_path.read_text())["task"]["definition"] == DEFINITION
    assert json.loads(layout.summary_path.read_text())["exit_status"] == "LimitsExceeded"

    # No secret in any file the run wrote.
    for path in all_files(run_dir):
        text = path.read_text(errors="replace")
        for name, value in secrets.items():
            assert value not in text, f"{name} leaked into {path.relative_to(run_dir)}"

    # mini-swe-agent's own inspector reads the trajectory.
    n_messages, n_steps, title = inspect_with_minisweagent(layout.trajectory_path)
    assert n_messages == 9 and n_steps == 4 and "Step 4/4" in title

    # Replaying the recorded replies (model `replay:PATH`) gives the same feedback, word for word.
    replay_dir = tmp_path / "replay"
    replayed = run_trajectory(
        plan_for("replay", num_turns=4), replay_dir, backend=FIBServeBackend(fibserve),
        model=make_model(f"replay:{layout.trajectory_path}"),
    )  # fmt: skip
    assert replayed.exit_status == "LimitsExceeded" and replayed.turns == 3
    again = load_trajectory(RunLayout(replay_dir).trajectory_path)["messages"]
    assert [m["content"] for m in again if m["role"] == "user"] == [
        m["content"] for m in messages if m["role"] == "user"
    ]
    assert "replay exhausted" in again[-1]["content"]


def test_a_1mb_reply_is_stored_once_and_resent_bounded(fibserve: str, tmp_path: Path) -> None:
    from mini_ptx_agent.history import RESENT_KERNEL_CHARS, RESENT_PROSE_CHARS

    musing = "Let me think about the memory layout once more. " * 21_000  # about 1 MB of prose
    huge = f"{musing}\n```python\n{GOOD}```\n"
    assert len(huge) > 1_000_000
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(MODEL_ID, [huge, GOOD_REPLY]) as server:
        summary = run_trajectory(
            plan_for("huge", num_turns=2),
            run_dir,
            backend=FIBServeBackend(fibserve),
            model=endpoint_model(server),
        )
    assert summary.turns == 2 and summary.correct_versions == [1, 2]  # the long reply's kernel was evaluated
    trajectory_bytes = RunLayout(run_dir).trajectory_path.stat().st_size
    assert len(huge) < trajectory_bytes < len(huge) + 200_000, trajectory_bytes  # the reply is stored once
    saved = load_trajectory(RunLayout(run_dir).trajectory_path)["messages"]
    assert saved[2]["content"] == huge  # whole in the trajectory
    # The second request resends the long reply bounded: its kernel whole, a prefix of its prose.
    assert server.sizes[1] < RESENT_PROSE_CHARS + RESENT_KERNEL_CHARS + 60_000, server.sizes
    resent = server.requests[1]["messages"][2]["content"]
    assert GOOD.rstrip() in resent and resent.startswith(musing[:1000]) and "not repeated here" in resent


def test_model_endpoint_down_mid_run_then_resume(fibserve: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(MODEL_ID, [BAD_REPLY, GOOD_REPLY], down_after=1) as server:
        model = endpoint_model(server)
        summary = run_trajectory(plan_for("down"), run_dir, backend=FIBServeBackend(fibserve), model=model)
    assert summary.exit_status == "InfrastructureError"
    assert not summary.runner_completed and not summary.kernel_correct
    assert "model API failed" in (summary.infrastructure_error or "")
    saved = load_trajectory(RunLayout(run_dir).trajectory_path)
    roles = [m["role"] for m in saved["messages"]]
    assert roles == ["system", "user", "assistant", "user", "exit"]
    assert saved["messages"][-1]["extra"]["infrastructure"]["source"] == "model"
    assert saved["messages"][3]["extra"]["ptxbench"]["status"] == "INCORRECT_NUMERICAL"  # turn 1 is complete
    assert not any(m.get("extra", {}).get("ptxbench", {}).get("turn") == 2 for m in saved["messages"])

    with ScriptedOpenAIServer(MODEL_ID, [GOOD_REPLY]) as server:
        resumed = run_trajectory(
            plan_for("down", num_turns=2),
            run_dir,
            backend=FIBServeBackend(fibserve),
            model=endpoint_model(server),
            resume=True,
        )
        assert len(server.requests[0]["messages"]) == 4  # system, task, the turn-1 reply and its feedback
    assert resumed.resumed and resumed.exit_status == "LimitsExceeded"
    assert resumed.turns == 2 and resumed.correct_versions == [2]
    assert (RunLayout(run_dir).success_dir / "kernel_v2.py").read_text() == GOOD


def test_fibserve_down_is_an_infrastructure_error(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with ScriptedOpenAIServer(MODEL_ID, [GOOD_REPLY]) as server:
        summary = run_trajectory(
            plan_for("dead"), tmp_path / "run", backend=FIBServeBackend(dead), model=endpoint_model(server)
        )
    assert summary.exit_status == "InfrastructureError"
    assert "unreachable" in (summary.infrastructure_error or "")
    assert summary.turns == 0 and summary.kernel_correct is None  # an outage is unknown, not a wrong kernel


def test_fibserve_dies_while_the_model_writes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    service = EmbeddedService(devices=["cpu"])
    url = service.start()
    try:
        backend = FIBServeBackend(url, reconnect_s=1.0)
        with ScriptedOpenAIServer(MODEL_ID, [GOOD_REPLY]) as server:
            model = endpoint_model(server)
            original = model.query

            def query_then_kill_service(messages, **kwargs):
                service.stop()  # the service goes down while the model is answering
                return original(messages, **kwargs)

            model.query = query_then_kill_service
            summary = run_trajectory(plan_for("died"), run_dir, backend=backend, model=model)
    finally:
        service.stop()
    assert summary.exit_status == "InfrastructureError"
    assert "evaluation service failed" in (summary.exit_message or "")
    saved = load_trajectory(RunLayout(run_dir).trajectory_path)
    assert saved["messages"][-1]["extra"]["infrastructure"]["source"] == "evaluation"
    assert not any("VERDICT" in str(m.get("content")) for m in saved["messages"])
