"""The agent's API keys reach no process that serves candidates, and an encoded key a kernel raises reaches
no prompt and no file (issue 14: a kernel read the keys of the embedded FIBServe from /proc/<parent>/environ,
reversed and dot-separated them, and raised them; exact-value redaction missed them).

A real embedded FIBServe (``fibserve serve --devices cpu``) is started with the keys in this process's
environment; the model is the real OpenAIEndpointModel talking to a scripted server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.environment.fibserve import FIBServeBackend
from mini_ptx_agent.models import make_model
from mini_ptx_agent.models.config import RetryPolicy
from mini_ptx_agent.runs.directory import RunPlan
from mini_ptx_agent.runs.launch import run_trajectory
from mini_ptx_agent.task import TaskConfig
from scripted_model import ScriptedOpenAIServer

pytestmark = pytest.mark.slow

KEYS = {
    "OPENAI_API_KEY": "sk-proj-T3stKeyOpenAI-8f2a91c7d4",
    "ACCRL_MODEL_API_KEY": "endpoint-bearer-T3st-55e0b1",
    "FIBSERVE_TOKEN": "fibserve-T3st-token-a81f",
}
MODEL_ID = "scripted/kernel-writer"
WORKLOAD = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"


def _encoded(key: str) -> str:
    return ".".join(key[::-1])  # what the kernel of the issue raised


LEAKING_KERNEL = f"""\
def run(x, y, z):
    raise RuntimeError("found: {_encoded(KEYS["OPENAI_API_KEY"])} and {_encoded(KEYS["ACCRL_MODEL_API_KEY"])}")
"""


@pytest.fixture(scope="module")
def service() -> Iterator[EmbeddedService]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in KEYS.items():
            patch.setenv(name, value)
        with EmbeddedService(devices=["cpu"]) as embedded:
            yield embedded


def test_the_embedded_fibserve_holds_none_of_the_agents_keys(service: EmbeddedService) -> None:
    assert service.process is not None
    proc = Path(f"/proc/{service.process.pid}")
    environ = (proc / "environ").read_bytes().decode(errors="replace")
    cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
    for name, value in KEYS.items():
        assert value not in environ and value not in cmdline, name
    assert "PATH=" in environ  # it did get an environment: the allowlisted part of ours


def test_an_encoded_key_in_a_kernels_error_reaches_no_prompt_and_no_file(
    service: EmbeddedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    task = TaskConfig(definition="vector_add_f32", language="triton", workloads=[WORKLOAD], timeout_s=120)
    plan = RunPlan(
        run_id="leak", created_at="2026-12-01T07:00:00+00:00", task=task, model=MODEL_ID,
        prompt_tag="triton-hopper", num_turns=2, turn_timeout_s=300, service="test",
    )  # fmt: skip
    replies = [f"```python\n{LEAKING_KERNEL}```\n", "I give up."]
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(MODEL_ID, replies) as server:
        model = make_model(MODEL_ID, model_host=server.host_port, retry=RetryPolicy(max_attempts=1))
        run_trajectory(plan, run_dir, backend=FIBServeBackend(service.url), model=model)
    feedback = server.requests[-1]["messages"][-1]["content"]  # what the model was told about turn 1
    assert "RUNTIME_ERROR" in feedback and "<redacted>" in feedback
    texts = {"the next prompt's feedback": feedback}
    texts |= {
        str(p.relative_to(run_dir)): p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file()
    }
    assert any(name.startswith("exp_000/evaluations/turn_001") for name in texts), sorted(texts)
    for where, text in texts.items():
        for key in KEYS.values():
            assert key not in text and _encoded(key) not in text, (where, key)
            assert json.dumps(_encoded(key))[1:-1] not in text, (where, key)
