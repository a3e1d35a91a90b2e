"""The route handlers called directly, without a server: each is a module-level function of its state."""

from __future__ import annotations

from pathlib import Path

import pytest
from fibserve.api import EvaluateRequest
from fibserve.datasets.catalog import Catalog
from fibserve.serve import routes
from fibserve.serve.errors import ApiError
from fibserve.serve.settings import ServeSettings
from fibserve.serve.state import ServerState
from fibserve.serve.store import TaskStatus, TaskStore
from fibserve.tools.executables import ToolPaths
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
    answer = routes.evaluate(request, state)
    assert answer.status == "pending" and answer.workload_uuids == [VECTOR_ADD_SMALL]
    record = state.store.get(answer.task_id)
    assert record is not None and record.status is TaskStatus.PENDING
    assert record.solution == answer.normalized_solution_name != "my kernel/v1"
    assert routes.task_answer(record).status == "pending"
