"""A client must not choose what counts as correct on a shared server: with a token, tolerances are locked.

Before, ``atol: 1e308`` made a kernel that computes x - y instead of x + y PASS on any server.
"""

from __future__ import annotations

import pytest
from fibserve.client import APIError, FIBServeClient
from fibserve.trace import EvaluationStatus
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution

pytestmark = pytest.mark.slow

TOKEN = {"FIBSERVE_TOKEN": "s3cret"}


def _wrong_kernel() -> dict:
    solution = triton_add_solution(name="subtracts", body="def run(x, y, z):\n    z.copy_(x - y)\n")
    solution["spec"]["language"] = "python"
    return solution


def test_a_server_with_a_token_refuses_request_tolerances_and_judges_by_its_own(start_server) -> None:
    server = start_server("--devices", "cpu", env=TOKEN)
    with FIBServeClient(server.url, token=TOKEN["FIBSERVE_TOKEN"]) as client:
        assert client.health().tolerances_locked is True
        with pytest.raises(APIError) as refused:
            client.submit_evaluate(_wrong_kernel(), [VECTOR_ADD_SMALL], atol=1e308)
        answer = client.evaluate(_wrong_kernel(), [VECTOR_ADD_SMALL], wait_timeout=240)
    assert refused.value.status_code == 403 and refused.value.code == "tolerances_locked"
    assert refused.value.details == {"fields": ["atol"]} and "remove atol" in refused.value.message
    (trace,) = answer.traces or []
    assert trace.evaluation is not None and trace.evaluation.status is EvaluationStatus.INCORRECT_NUMERICAL
    used = trace.evaluation.correctness.extra
    assert (used["atol"], used["rtol"]) == (answer.config.atol, answer.config.rtol)  # kept in the trace
    assert answer.config.origin.get("atol") != "request"


def test_unlocked_tolerances_can_be_chosen_with_a_token(start_server) -> None:
    server = start_server("--devices", "cpu", "--unlocked-tolerances", env=TOKEN)
    with FIBServeClient(server.url, token=TOKEN["FIBSERVE_TOKEN"]) as client:
        assert client.health().tolerances_locked is False
        submitted = client.submit("evaluate", _wrong_kernel(), workload_uuids=[VECTOR_ADD_SMALL], atol=0.5)
        assert client.cancel(submitted.task_id).task_id == submitted.task_id
