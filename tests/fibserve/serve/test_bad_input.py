"""Hostile or broken input gets a 4xx whose message names the field, never a 500 or a late build failure."""

from __future__ import annotations

import json

import httpx
import pytest
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution


def _post(url: str, path: str, body: bytes) -> httpx.Response:
    return httpx.post(url + path, content=body, headers={"content-type": "application/json"}, timeout=60)


def _with_sources(*extra: dict) -> dict:
    solution = triton_add_solution()
    solution["sources"] += list(extra)
    return solution


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"solution": triton_add_solution(name="x\ud800")}, "body.solution.name"),
        (
            {"solution": _with_sources({"path": "d\ud800/k.py", "content": ""})},
            "body.solution.sources.1.path",
        ),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_the_field(shared_server, body: dict, field: str) -> None:
    answer = _post(shared_server.url, "/evaluate", json.dumps(body).encode())  # ensure_ascii: "\ud800" escape
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and field in error["message"]
    error["message"].encode("utf-8")  # printable by any client


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_a_non_finite_tolerance_is_a_422_naming_it(shared_server, value: bytes) -> None:
    solution = json.dumps(triton_add_solution()).encode()
    answer = _post(shared_server.url, "/evaluate", b'{"solution": %s, "atol": %s}' % (solution, value))
    assert answer.status_code == 422, answer.text
    assert "body.atol: Input should be a finite number" in answer.json()["error"]["message"]
    json.loads(answer.text, parse_constant=lambda token: pytest.fail(f"bare {token} in the answer"))


@pytest.mark.parametrize("endpoint", ["/evaluate", "/compile"])
@pytest.mark.parametrize(
    ("sources", "words"),
    [
        ([{"path": "a.py", "content": ""}, {"path": "a.py/b.py", "content": ""}], "'a.py' is a file, but"),
        ([{"path": "x" * 5000 + ".py", "content": ""}], "longer than 1024 bytes"),
        ([{"path": "d/" + "x" * 300 + ".py", "content": ""}], "longer than 255 bytes"),
    ],
)
def test_paths_no_build_can_write_are_refused_at_submission(
    shared_server, endpoint: str, sources: list, words: str
) -> None:
    body = {"solution": _with_sources(*sources), "workload_uuids": [VECTOR_ADD_SMALL]}
    if endpoint == "/compile":
        body.pop("workload_uuids")
    answer = _post(shared_server.url, endpoint, json.dumps(body).encode())
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert "body.solution" in message and words in message


def test_too_many_or_too_large_sources_are_413_naming_the_limit(shared_server) -> None:
    many = _with_sources(*({"path": f"f{i}.py", "content": ""} for i in range(64)))  # 65 files
    answer = _post(shared_server.url, "/evaluate", json.dumps({"solution": many}).encode())
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["code"] == "too_many_sources" and "at most 64" in error["message"]
    assert error["details"]["field"] == "solution.sources"

    large = _with_sources({"path": "big.py", "content": "#" * (8 * 1024 * 1024)})
    answer = _post(shared_server.url, "/compile", json.dumps({"solution": large}).encode())
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["code"] == "sources_too_large" and "--max-source-mb" in error["message"]


def test_sources_beyond_any_servers_limit_are_counted_before_they_are_validated(shared_server) -> None:
    """300,000 sources once took 9 s to validate and then a lane 113 s to build; now the count alone decides."""
    flood = _with_sources(*({"path": f"f{i}.py", "content": "x = 1"} for i in range(20_000)))
    answer = _post(shared_server.url, "/evaluate", json.dumps({"solution": flood}).encode())
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert "body.solution: Value error, sources holds 20001 files" in error["message"]
    assert all("input" not in detail for detail in error["details"])  # the body is not echoed back
