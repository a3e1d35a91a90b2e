"""The HTTP API of a real `fibserve serve` process: discovery, error answers, auth, body limit, cancel."""

from __future__ import annotations

import json

import httpx
import pytest
from fibserve.client import APIError, FIBServeClient, ServiceUnreachable
from fibserve.datasets import default_root
from fibserve.trace.trace_set import TraceSet
from serve_helpers import SHARED_DATA, VECTOR_ADD_SMALL, triton_add_solution


def _error(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["message"], body
    return body["error"]


def test_discovery_on_the_bundled_trace_set(shared_server) -> None:
    expected = TraceSet.load(default_root())
    with FIBServeClient(shared_server.url) as client:
        health = client.health()
        names = [d.name for d in client.definitions()]
        definition = client.definition("vector_add_f32")
        workloads = client.workloads("vector_add_f32")
        one = client.workload(VECTOR_ADD_SMALL)
    assert health.status in ("ok", "degraded") and [w.device for w in health.workers] == ["cpu"]
    assert health.queue_size >= 0 and health.running >= 0
    assert names == sorted(expected.definitions)
    assert definition == expected.definitions["vector_add_f32"]
    assert [w.uuid for w in workloads] == [w.uuid for w in expected.workloads_for("vector_add_f32")]
    assert one.axes == {"N": 1024}


def test_discovery_on_the_shared_example_trace_set(start_server) -> None:
    root = SHARED_DATA / "flashinfer-bench-example"
    if not root.is_dir():
        pytest.skip(f"shared example trace set not found at {root}")
    server = start_server("--local", str(root), "--devices", "cpu")
    with FIBServeClient(server.url) as client:
        assert [d.name for d in client.definitions()] == ["gemm_n4096_k4096"]
        definition = client.definition("gemm_n4096_k4096")
        workloads = client.workloads("gemm_n4096_k4096")
    assert definition.op_type == "gemm" and list(definition.inputs) == ["A", "B"]
    lines = (root / "workloads" / "gemm_n4096_k4096.jsonl").read_text().splitlines()
    assert [w.uuid for w in workloads] == [
        json.loads(line)["workload"]["uuid"] for line in lines if line.strip()
    ]


def test_openapi_documents_every_endpoint(shared_server) -> None:
    spec = httpx.get(shared_server.url + "/openapi.json").json()
    paths = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    expected = {
        ("GET", "/health"),
        ("GET", "/definitions"),
        ("GET", "/definitions/{name}"),
        ("GET", "/definitions/{name}/workloads"),
        ("GET", "/workloads/{uuid}"),
        ("POST", "/evaluate"),
        ("POST", "/evaluate/batch"),
        ("POST", "/sanitize"),
        ("POST", "/profile"),
        ("POST", "/compile"),
        ("GET", "/tasks/{task_id}"),
        ("POST", "/tasks/batch"),
        ("DELETE", "/tasks/{task_id}"),
    }
    assert expected <= paths
    assert "atol" in spec["components"]["schemas"]["EvaluateRequest"]["properties"]
    assert "atol" in spec["components"]["schemas"]["EvaluateBatchRequest"]["properties"]
    assert httpx.get(shared_server.url + "/docs").status_code == 200


def test_unknown_names_are_404_with_close_matches(shared_server) -> None:
    response = httpx.get(shared_server.url + "/definitions/vector_add_f23")
    assert response.status_code == 404
    error = _error(response)
    assert error["code"] == "unknown_definition" and "vector_add_f32" in error["message"]
    assert httpx.get(shared_server.url + "/definitions/nope/workloads").status_code == 404
    assert _error(httpx.get(shared_server.url + "/workloads/not-a-uuid"))["code"] == "unknown_workload"
    assert _error(httpx.get(shared_server.url + "/tasks/0123"))["code"] == "unknown_task"
    assert _error(httpx.get(shared_server.url + "/no/such/endpoint"))["code"] == "not_found"


def test_a_solution_for_an_unknown_definition_is_404(shared_server) -> None:
    solution = triton_add_solution() | {"definition": "vector_add_f64"}
    with FIBServeClient(shared_server.url) as client, pytest.raises(APIError) as info:
        client.submit_evaluate(solution)
    assert info.value.status_code == 404 and info.value.code == "unknown_definition"
    assert "vector_add_f32" in info.value.message


def test_workloads_of_another_definition_are_refused(shared_server) -> None:
    other = TraceSet.load(default_root()).workloads_for("rmsnorm_f32")[0].uuid
    response = httpx.post(
        shared_server.url + "/evaluate", json={"solution": triton_add_solution(), "workload_uuids": [other]}
    )
    assert response.status_code == 422 and _error(response)["code"] == "workload_mismatch"
    response = httpx.post(
        shared_server.url + "/evaluate",
        json={"solution": triton_add_solution(), "workload_uuids": ["missing"]},
    )
    assert response.status_code == 404 and _error(response)["code"] == "unknown_workload"


@pytest.mark.parametrize(
    ("body", "code", "phrase"),
    [
        (b'{"solution": {', "malformed_json", "not valid JSON"),
        (b"[1, 2]", "malformed_json", "JSON object"),
        (json.dumps({"solution": triton_add_solution(), "atoll": 1}).encode(), "invalid_request", "atoll"),
        (json.dumps({"solution": triton_add_solution(), "atol": -1}).encode(), "invalid_request", "atol"),
    ],
)
def test_malformed_requests_are_422_saying_what_is_wrong(
    shared_server, body: bytes, code: str, phrase: str
) -> None:
    response = httpx.post(
        shared_server.url + "/evaluate", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    error = _error(response)
    assert error["code"] == code and phrase in error["message"]


@pytest.mark.parametrize("path", ["../x.py", "/etc/passwd", "a/../../kernel.py", "a\\b.py"])
def test_path_traversal_in_solution_sources_is_rejected(shared_server, path: str) -> None:
    solution = triton_add_solution()
    solution["sources"].append({"path": path, "content": "x = 1\n"})
    for endpoint in ("/evaluate", "/sanitize", "/compile"):
        response = httpx.post(shared_server.url + endpoint, json={"solution": solution})
        assert response.status_code == 422, (endpoint, response.text)
        assert "sources" in _error(response)["message"]


def test_profile_rejects_unsafe_ncu_names(shared_server) -> None:
    for field, value in (("metrics", ["--launch-skip"]), ("sections", ["a;rm -rf /"]), ("set", "full full")):
        body = {"solution": triton_add_solution(), field: value}
        response = httpx.post(shared_server.url + "/profile", json=body)
        assert response.status_code == 422, (field, response.text)
        assert "Nsight Compute name" in _error(response)["message"]


def test_submission_answers_the_normalized_solution_name_and_cancel_fails_a_pending_task(
    shared_server,
) -> None:
    with FIBServeClient(shared_server.url) as client:
        answer = client.submit(
            "evaluate", triton_add_solution(name=" my kernel / v2 "), workload_uuids=[VECTOR_ADD_SMALL]
        )
        assert answer.normalized_solution_name == "my_kernel_v2"
        assert answer.workload_uuids == [VECTOR_ADD_SMALL] and answer.definition == "vector_add_f32"
        cancelled = client.cancel(answer.task_id)
        assert cancelled.solution == "my_kernel_v2"
        final = client.wait(answer.task_id, timeout=120)
    # Either the cancel reached it while pending/running, or the lane had already finished it.
    assert final.status in ("failed", "completed")
    if final.status == "failed":
        assert final.error is not None and final.error.code in (
            "cancelled",
            "internal_error",
            "evaluation_error",
        )


def test_token_and_body_limit(start_server) -> None:
    # The token comes from FIBSERVE_TOKEN here (the --token option reads the same variable).
    server = start_server("--devices", "cpu", "--max-body-mb", "0.01", env={"FIBSERVE_TOKEN": "s3cret"})
    url = server.url
    assert httpx.get(url + "/health").status_code == 200  # health and docs stay open
    assert httpx.get(url + "/docs").status_code == 200
    missing = httpx.get(url + "/definitions")
    assert missing.status_code == 401 and "missing bearer token" in _error(missing)["message"]
    wrong = httpx.get(url + "/definitions", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "wrong bearer token" in _error(wrong)["message"]
    with FIBServeClient(url, token="s3cret") as client:
        assert "vector_add_f32" in [d.name for d in client.definitions()]
        big = triton_add_solution(body="# " + "x" * 20_000 + "\n")
        with pytest.raises(APIError) as info:
            client.submit_evaluate(big)
    assert info.value.status_code == 413 and "--max-body-mb" in info.value.message

    def chunks():
        yield b'{"solution": "'
        for _ in range(20):
            yield b"y" * 1024
        yield b'"}'

    streamed = httpx.post(url + "/evaluate", content=chunks(), headers={"Authorization": "Bearer s3cret"})
    assert streamed.status_code == 413 and _error(streamed)["code"] == "body_too_large"


def test_the_client_tells_an_unreachable_service_from_an_http_error() -> None:
    from serve_helpers import free_port

    with (
        FIBServeClient(f"http://127.0.0.1:{free_port()}", timeout=2) as client,
        pytest.raises(ServiceUnreachable),
    ):
        client.health()
