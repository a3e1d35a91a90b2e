"""Many candidates at once through a real server (one CPU lane): ``POST /evaluate/batch`` with results as they
finish, a fair share for a second client, and a CUDA candidate built ahead while the lane is busy."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from fibserve.analysis.report import Analysis
from fibserve.build import BuildStatus
from fibserve.client import CandidateResult, FIBServeClient
from fibserve.trace import EvaluationStatus
from kernel_fixtures import KERNELS, cuda_solution
from serve_helpers import TRITON_ADD, VECTOR_ADD_SMALL, ServerProcess, triton_add_solution

pytestmark = pytest.mark.slow

SECOND_CLIENT = "127.0.0.2"
"""Another loopback address: the server tells clients apart by their peer address."""

BATCH = [
    triton_add_solution("good a"),
    triton_add_solution("wrong", TRITON_ADD.replace("x + y", "x - y")),
    triton_add_solution("imports os", "import os\n" + TRITON_ADD),
]
EXPECTED = [
    EvaluationStatus.PASSED,
    EvaluationStatus.INCORRECT_NUMERICAL,
    EvaluationStatus.COMPILE_ERROR,
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("batch") / "state"
    server = ServerProcess(state, ["--devices", "cpu", "--build-workers", "1"]).start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def batch_run(server: ServerProcess) -> tuple[list[tuple[CandidateResult, float]], dict]:
    """The batch from one client, then a single request from another, submitted while the batch is queued; each
    of the batch's results with the time it was received."""
    transport = httpx.HTTPTransport(local_address=SECOND_CLIENT)
    with (
        FIBServeClient(server.url) as client,
        httpx.Client(base_url=server.url, transport=transport) as other,
    ):
        results = client.evaluate_many(BATCH, [VECTOR_ADD_SMALL], wait_timeout=600)
        body = {"solution": triton_add_solution("single"), "workload_uuids": [VECTOR_ADD_SMALL]}
        single_id = other.post("/evaluate", json=body).raise_for_status().json()["task_id"]
        collected = [(result, time.time()) for result in results]
        single = other.get(f"/tasks/{single_id}", params={"timeout": 300}, timeout=330).json()
    return collected, single


def test_a_batch_returns_each_candidates_result_with_its_own_status(batch_run) -> None:
    results = [result for result, _ in batch_run[0]]
    assert sorted(r.index for r in results) == [0, 1, 2]
    for result in results:
        assert result.status == "completed", result.answer.error
        assert result.statuses == [EXPECTED[result.index]], (result.index, result.answer.logs)
        assert result.answer.solution == ["good_a", "wrong", "imports_os"][result.index]
    finished = [r.answer.finished_at or 0.0 for r in results]
    assert finished == sorted(finished)
    first_received = batch_run[0][0][1]
    assert first_received < finished[-1]  # yielded as they finished, not once all had


def test_another_clients_single_request_is_not_queued_behind_the_whole_batch(batch_run) -> None:
    results, single = batch_run
    assert single["status"] == "completed"
    assert single["traces"][0]["evaluation"]["status"] == "PASSED"
    assert single["finished_at"] < max(r.answer.finished_at or 0.0 for r, _ in results)


def test_a_cuda_candidate_queued_behind_busy_work_is_built_ahead_and_its_lane_reads_the_build(
    server: ServerProcess,
) -> None:
    """The pool takes the CUDA task as it is queued, while the lane is busy for 5 s: the lane then finds the
        build in the cache (or waits for the pool's build to finish), never compiles it a second time. The source is
        this test's own, so no other test has built it; a lane building it itself would report its analysis's build
    ``cached: false``."""
    blocker = triton_add_solution(
        "blocker", "import time\n\ntime.sleep(5)\n\n\ndef run(x, y, z):\n    z.copy_(x + y)\n"
    )
    blocker["spec"]["language"] = "python"
    source = (KERNELS / "simt_add.cu").read_text() + "// built ahead in test_evaluate_batch.py\n"
    cuda = cuda_solution(source, name="simt add", definition="vector_add_f32").model_dump(mode="json")
    with FIBServeClient(server.url) as client:
        blocking = client.submit_evaluate(blocker, [VECTOR_ADD_SMALL])
        task_id = client.submit_evaluate(cuda, [VECTOR_ADD_SMALL])
        pool = client.health().build_ahead
        answers = {a.task_id: a for a in client.batch([blocking, task_id], timeout=300)}
        after = client.health().build_ahead
    assert pool is not None and pool.workers == 1 and pool.waiting + pool.building + pool.built == 1
    assert after is not None and after.waiting == after.building == after.built == 0
    assert answers[blocking].status == "completed"
    answer = answers[task_id]
    assert answer.status == "completed" and answer.executed is False  # CPU lane: built and analysed only
    # The lane's first build (its static analysis's) was a cache hit; its second, for loading, always is.
    analysis = answer.analysis
    assert isinstance(analysis, Analysis) and analysis.build is not None
    assert analysis.build.status is BuildStatus.OK and analysis.build.cached
    assert answer.started_at is not None and answer.started_at >= (answers[blocking].finished_at or 0.0)
