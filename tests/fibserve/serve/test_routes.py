"""The route handlers called directly, without a server: each is a module-level function of its state."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import Request
from fibserve.api import EvaluateBatchRequest, EvaluateRequest
from fibserve.datasets.catalog import Catalog
from fibserve.serve import routes
from fibserve.serve.build_ahead import BuildAhead
from fibserve.serve.errors import ApiError
from fibserve.serve.queue_order import Prebuild
from fibserve.serve.settings import ServeSettings
from fibserve.serve.state import ServerState
from fibserve.serve.store import TaskStatus, TaskStore
from fibserve.tools.executables import ToolPaths
from kernel_fixtures import cuda_solution
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution


@pytest.fixture
def state(tmp_path: Path):
    """A state on the bundled trace set with a scratch store and no lanes (nothing runs a task)."""
    store = TaskStore(tmp_path / "tasks.sqlite3")
    yield ServerState(
        settings=ServeSettings(devices=["cpu"], state_dir=tmp_path),
        catalog=Catalog.load(None),
        store=store,
        devices=["cpu"],
        tools=ToolPaths(),
        handler=None,  # type: ignore[arg-type]
        factory=None,  # type: ignore[arg-type]
        closer=None,
    )
    store.close()


def _from(host: str) -> Request:
    """A request as the app sees one from ``host``."""
    return Request({"type": "http", "client": (host, 40000), "headers": []})


def test_an_unknown_definition_is_a_404_naming_close_matches(state: ServerState) -> None:
    with pytest.raises(ApiError) as caught:
        routes.definition("vector_add_f23", state)
    assert caught.value.status == 404 and caught.value.code == "unknown_definition"
    assert caught.value.details == {"close_matches": ["vector_add_f32"]}


def test_evaluate_queues_the_chosen_workloads_under_the_normalized_name(state: ServerState) -> None:
    request = EvaluateRequest.model_validate(
        {
            "solution": triton_add_solution("my kernel/v1"),
            "workload_uuids": [VECTOR_ADD_SMALL, VECTOR_ADD_SMALL],
        }
    )
    answer = routes.evaluate(request, state, _from("10.1.2.3"))
    assert answer.status == "pending" and answer.workload_uuids == [VECTOR_ADD_SMALL]
    record = state.store.get(answer.task_id)
    assert record is not None and record.status is TaskStatus.PENDING
    assert record.solution == answer.normalized_solution_name != "my kernel/v1"
    assert record.client == "10.1.2.3" and record.prebuild is None
    assert routes.task_answer(record).status == "pending"


CUDA_ADD = cuda_solution(
    "// a CUDA candidate; this test builds nothing\n", name="cuda add", definition="vector_add_f32"
).model_dump(mode="json")


def test_a_batch_queues_one_task_per_candidate_and_marks_the_cuda_ones_for_building_ahead(
    state: ServerState,
) -> None:
    state.build_ahead = BuildAhead(state.store, state.catalog, ["sm_90a"], workers=1)  # not started
    request = EvaluateBatchRequest.model_validate(
        {
            "solutions": [triton_add_solution("a"), CUDA_ADD, triton_add_solution("a")],
            "workload_uuids": [VECTOR_ADD_SMALL],
        }
    )
    answer = routes.evaluate_batch(request, state, _from("10.1.2.3"))
    assert answer.definition == "vector_add_f32" and answer.workload_uuids == [VECTOR_ADD_SMALL]
    assert answer.normalized_solution_names == ["a", "cuda_add", "a"] and len(set(answer.task_ids)) == 3
    records = [state.store.get(task_id) for task_id in answer.task_ids]
    assert [r.prebuild for r in records if r] == [None, Prebuild.WAITING, None]
    assert {r.client for r in records if r} == {"10.1.2.3"}
    assert state.build_ahead.info().waiting == 1


def test_a_batch_with_a_refused_candidate_queues_nothing_and_names_it(state: ServerState) -> None:
    other = dict(triton_add_solution("b"), definition="softmax_rows_f32")
    mixed = EvaluateBatchRequest.model_validate({"solutions": [triton_add_solution("a"), other]})
    with pytest.raises(ApiError) as caught:
        routes.evaluate_batch(mixed, state, _from("10.1.2.3"))
    assert caught.value.code == "mixed_definitions" and caught.value.details == {
        "definitions": ["softmax_rows_f32", "vector_add_f32"]
    }
    too_long = EvaluateBatchRequest.model_validate(
        {"solutions": [triton_add_solution("a"), triton_add_solution("b")], "timeout": 3000}
    )
    with pytest.raises(ApiError) as caught:
        routes.evaluate_batch(too_long, state, _from("10.1.2.3"))
    assert caught.value.code == "timeout_too_long" and caught.value.message.startswith("solutions[0]: ")
    huge = triton_add_solution("huge")
    huge["sources"] = [{"path": f"f{i}.py", "content": "x = 1\n"} for i in range(65)] + huge["sources"]
    with pytest.raises(ApiError) as caught:
        routes.evaluate_batch(
            EvaluateBatchRequest.model_validate({"solutions": [triton_add_solution("a"), huge]}),
            state,
            _from("h"),
        )
    assert caught.value.code == "too_many_sources" and caught.value.message.startswith("solutions[1]: ")
    assert state.store.counts()[TaskStatus.PENDING] == 0


def test_a_stored_result_field_the_answer_lacks_is_logged_not_dropped_silently(
    state: ServerState, caplog: pytest.LogCaptureFixture
) -> None:
    """A result stored by another version of FIBServe may hold a field this server does not answer: it is left
    out of the answer, and the log names it (issue 28: the answer used to drop unknown keys without a word)."""
    request = EvaluateRequest.model_validate(
        {"solution": triton_add_solution("kept"), "workload_uuids": [VECTOR_ADD_SMALL]}
    )
    record = state.store.get(routes.evaluate(request, state, _from("10.1.2.3")).task_id)
    stored = record.model_copy(update={"result": {"logs": "kept", "speedup_v9": 2.0}})
    with caplog.at_level("WARNING", logger="fibserve.serve.routes"):
        answer = routes.task_answer(stored)
    assert answer.logs == "kept" and "speedup_v9" not in answer.model_dump()
    assert any("speedup_v9" in r.getMessage() and record.id in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="fibserve.serve.routes"):
        routes.task_answer(record)
    assert caplog.records == []
