"""mini-ptx-agent as a Harbor agent, end to end without Docker: Harbor's Python 3.12 loads
``mini_ptx_agent.harbor.agent:MiniPtxAgent`` by import path, installs and runs it in a local shell standing in
for the task container, against a scripted OpenAI-compatible model and a real FIBServe on 127.0.0.1 (CPU
lanes); the ATIF trajectory it leaves is checked with Harbor's own validator.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from harbor_env import run_checks
from mini_ptx_agent.harbor.oracles import find_oracle
from scripted_openai import completion, start_server
from serve_helpers import ServerProcess

pytestmark = pytest.mark.slow

WORKLOAD = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"  # vector_add_f32, N = 1024


def test_harbor_runs_the_agent_and_reads_its_atif_trajectory(server: ServerProcess, tmp_path: Path) -> None:
    kernel = find_oracle("vector_add_f32", "triton").source
    model, http = start_server()
    model.script(
        (200, completion("Let me plan the tiling first.")),  # no kernel block: a format error
        (200, completion(f"One program per 1024 elements.\n```python\n{kernel}```\n", prompt_tokens=20)),
    )
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps({"definition": "vector_add_f32", "language": "triton", "workloads": [WORKLOAD]})
    )
    logs, submitted = tmp_path / "agent-logs", tmp_path / "workspace" / "kernel.py"
    logs.mkdir()
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # the container's ptxbench
        "SERVICE_URL": server.url, "ACCRL_MODEL_HOST": model.host, "PTXBENCH_TASK_CONFIG": str(task),
        "PTXBENCH_KERNEL": str(submitted), "ANTHROPIC_API_KEY": "sk-ant-not-for-this-model",
    }  # fmt: skip
    try:
        result = run_checks("agent", str(logs), "served-model", env=env)
    finally:
        http.shutdown()

    assert result["name"] == "mini-ptx-agent" and result["version"] == "0.1.0" and result["atif_capability"]
    assert "--model served-model" in result["command"] and "--num-turns 2" in result["command"]
    assert "sk-ant" not in result["command"]  # credentials travel in the command's environment only
    assert {"ACCRL_MODEL_HOST", "SERVICE_URL", "PTXBENCH_TASK_CONFIG", "ANTHROPIC_API_KEY"} <= set(
        result["forwarded"]
    )
    context = result["context"]
    assert (context["n_input_tokens"], context["n_output_tokens"]) == (11 + 20, 7 + 7)
    assert (
        context["metadata"]["exit_status"] == "LimitsExceeded"
        and context["metadata"]["kernel_correct"] is True
    )
    assert context["metadata"]["submitted_turn"] == 2 and submitted.read_text() == kernel
    assert len(model.chat_requests()) == 2

    atif_path = logs / "trajectory.json"
    validated = run_checks("atif", str(atif_path))
    assert validated[str(atif_path)] == {"valid": True, "errors": []}
    atif = json.loads(atif_path.read_text())
    assert [s["source"] for s in atif["steps"]] == ["system", "user", "agent", "agent"]
    format_error, evaluated = atif["steps"][2], atif["steps"][3]
    assert (
        "tool_calls" not in format_error
        and "```python" in format_error["observation"]["results"][0]["content"]
    )
    (call,) = evaluated["tool_calls"]
    assert call["function_name"] == "evaluate_kernel" and call["arguments"] == {
        "turn": 2,
        "file": "kernel.py",
    }
    (result_of_call,) = evaluated["observation"]["results"]
    assert result_of_call["source_call_id"] == call["tool_call_id"] and "PASSED" in result_of_call["content"]
    assert (
        atif["agent"]["model_name"] == "served-model" and atif["extra"]["exit"]["status"] == "LimitsExceeded"
    )
    assert atif["final_metrics"]["total_steps"] == 4
    assert "sk-ant" not in atif_path.read_text()
