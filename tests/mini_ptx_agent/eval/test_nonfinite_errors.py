"""A kernel that writes nothing leaves the NaN poison in its outputs: its errors are NaN, and they travel as the
strings "NaN" from the lane through the task store, GET /tasks and /tasks/batch, fibserve.client and the agent's
parse, ending as an ordinary INCORRECT_NUMERICAL verdict (before, both endpoints answered HTTP 500)."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from fibserve.client import FIBServeClient
from fibserve.trace import EvaluationStatus
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.environment.fibserve import FIBServeBackend
from mini_ptx_agent.environment.report import KernelReport
from mini_ptx_agent.feedback import format_feedback
from mini_ptx_agent.task import TaskConfig

pytestmark = pytest.mark.slow

WORKLOAD = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"  # vector_add_f32, N = 1024

WRITES_NOTHING = "import triton\n\n\ndef run(x, y, z):\n    pass\n"


def _strict_json(text: str) -> object:
    """Parse ``text`` as standard JSON: a bare NaN or Infinity token is an error."""

    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_nan_errors_round_trip_from_the_lane_to_the_agent() -> None:
    task = TaskConfig(definition="vector_add_f32", language="triton", workloads=[WORKLOAD], timeout_s=120)
    solution = task.solution(WRITES_NOTHING, name="writes nothing", author="tests")
    with EmbeddedService(devices=["cpu"]) as service, FIBServeClient(service.url) as client:
        task_id = client.submit_evaluate(solution, [WORKLOAD])
        answer = client.wait(task_id, timeout=240)
        single = httpx.get(f"{service.url}/tasks/{task_id}", timeout=30)
        batch = httpx.post(f"{service.url}/tasks/batch", json={"task_ids": [task_id]}, timeout=30)
        report = FIBServeBackend(service.url).evaluate(solution, task)

    assert single.status_code == 200 and batch.status_code == 200, (single.text[:500], batch.text[:500])
    wire = _strict_json(single.text)["traces"][0]["evaluation"]["correctness"]
    assert wire["max_absolute_error"] == "NaN" and wire["max_relative_error"] == "NaN"
    assert _strict_json(batch.text)[0]["traces"][0]["evaluation"]["correctness"] == wire

    (trace,) = answer.traces or []
    assert answer.status == "completed" and trace.evaluation is not None
    assert trace.evaluation.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert math.isnan(trace.evaluation.correctness.max_absolute_error)

    assert report.status is EvaluationStatus.INCORRECT_NUMERICAL  # a verdict, not an infrastructure error
    (result,) = report.workloads
    assert math.isnan(result.max_absolute_error) and math.isnan(result.max_relative_error)
    assert "max abs error nan" in format_feedback(report)
    again = KernelReport.model_validate_json(report.model_dump_json())  # a run directory's turn file
    assert math.isnan(again.workloads[0].max_absolute_error)
    assert math.isnan(again.traces[0].evaluation.correctness.max_relative_error)
