"""The SQLite task store: WAL mode, queue order, recovery after a crash, attempts, cancel, expiry."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from fibserve.serve.queue_order import Prebuild
from fibserve.serve.store import Submission, TaskStatus, TaskStore


def _submit(store: TaskStore, n: int) -> list[str]:
    return [store.submit("evaluate", "vector_add_f32", f"s{i}", {"i": i}).id for i in range(n)]


def test_database_is_in_wal_mode_and_tasks_are_claimed_in_submission_order(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks.sqlite3")
    ids = _submit(store, 3)
    mode = sqlite3.connect(tmp_path / "tasks.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    claimed = [store.claim("cpu") for _ in range(4)]
    assert [c.id for c in claimed[:3] if c] == ids
    assert claimed[3] is None
    assert all(
        c.status is TaskStatus.RUNNING and c.attempt == 1 and c.lane == "cpu" for c in claimed[:3] if c
    )


def test_a_second_store_on_the_same_file_sees_committed_tasks(tmp_path: Path) -> None:
    """What a SIGKILLed server leaves behind is readable by the next one (nothing buffered in memory)."""
    path = tmp_path / "tasks.sqlite3"
    first = TaskStore(path, exclusive=False)
    ids = _submit(first, 2)
    running = first.claim("cuda:0")
    assert running is not None
    # no close(): the first process "dies" here
    second = TaskStore(path)
    requeued, failed = second.recover()
    assert requeued == [running.id] and failed == []
    again = [second.claim("cuda:0"), second.claim("cuda:0")]
    assert [t.id for t in again if t] == ids
    assert again[0] is not None and again[0].attempt == 2


def test_a_task_that_keeps_killing_the_server_is_failed_after_max_attempts(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    (task_id,) = _submit(TaskStore(path, max_attempts=2, exclusive=False), 1)
    for _ in range(2):
        store = TaskStore(path, max_attempts=2, exclusive=False)
        store.recover()
        claimed = store.claim("cpu")
        assert claimed is not None and claimed.id == task_id
    store = TaskStore(path, max_attempts=2, exclusive=False)
    requeued, failed = store.recover()
    assert (requeued, failed) == ([], [task_id])
    record = store.get(task_id)
    assert record is not None and record.status is TaskStatus.FAILED
    assert record.error is not None and record.error["code"] == "server_restarted"


def test_a_late_result_from_an_abandoned_attempt_is_refused(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3")
    _submit(store, 1)
    first = store.claim("cpu")
    assert first is not None
    assert store.requeue(first.id, first.attempt)
    second = store.claim("cpu")
    assert second is not None and second.attempt == 2
    assert not store.finish(first.id, first.attempt, TaskStatus.COMPLETED, result={"from": "old"})
    assert store.finish(second.id, second.attempt, TaskStatus.COMPLETED, result={"from": "new"})
    record = store.get(first.id)
    assert record is not None and record.result == {"from": "new"}


def test_cancel_fails_a_pending_task_and_flags_a_running_one(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3")
    running_id, pending_id = _submit(store, 2)
    assert store.claim("cpu") is not None
    cancelled = store.cancel(pending_id)
    assert cancelled is not None and cancelled.status is TaskStatus.FAILED
    assert cancelled.error is not None and cancelled.error["code"] == "cancelled"
    flagged = store.cancel(running_id)
    assert flagged is not None and flagged.status is TaskStatus.RUNNING and flagged.cancel_requested
    assert store.cancel("nope") is None
    assert store.claim("cpu") is None  # the cancelled task is not handed out


def test_finished_answers_expire_after_the_ttl(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3", ttl_s=0.2)
    (task_id,) = _submit(store, 1)
    task = store.claim("cpu")
    assert task is not None
    store.finish(task_id, task.attempt, TaskStatus.COMPLETED, result={})
    assert store.get(task_id) is not None
    time.sleep(0.3)
    assert store.get(task_id) is None
    assert store.expire() == 1


def test_finish_refuses_a_non_final_status(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3")
    with pytest.raises(ValueError, match="final status"):
        store.finish("x", 1, TaskStatus.RUNNING)


def test_a_second_server_on_the_same_store_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    first = TaskStore(path)
    with pytest.raises(RuntimeError, match="another FIBServe server is using"):
        TaskStore(path)
    first.close()
    TaskStore(path).close()


def test_non_finite_errors_are_stored_as_standard_json_strings_and_read_back(tmp_path: Path) -> None:
    import json
    import math

    from fibserve.serve.routes import task_answer

    store = TaskStore(tmp_path / "tasks.sqlite3")
    (task_id,) = _submit(store, 1)
    claimed = store.claim("cpu")
    assert claimed is not None
    trace = {
        "definition": "vector_add_f32",
        "workload": {"uuid": "w", "axes": {"N": 4}, "inputs": {}},
        "solution": "s",
        "evaluation": {
            "status": "INCORRECT_NUMERICAL",
            "environment": {"hardware": "cpu"},
            "timestamp": "2026-01-01T00:00:00Z",
            "correctness": {"max_relative_error": math.nan, "max_absolute_error": math.inf},
        },
    }
    assert store.finish(task_id, claimed.attempt, TaskStatus.COMPLETED, result={"traces": [trace]})
    raw = sqlite3.connect(tmp_path / "tasks.sqlite3").execute("SELECT result FROM tasks").fetchone()[0]
    stored = json.loads(raw, parse_constant=lambda token: pytest.fail(f"bare {token} in the store"))
    assert stored["traces"][0]["evaluation"]["correctness"]["max_relative_error"] == "NaN"
    record = store.get(task_id)
    assert record is not None
    correctness = task_answer(record).traces[0].evaluation.correctness
    assert math.isnan(correctness.max_relative_error) and correctness.max_absolute_error == math.inf


def _of(store: TaskStore, client: str, n: int, *, prebuild: bool = False) -> list[str]:
    items = [Submission(f"{client}{i}", {"i": i}, prebuild) for i in range(n)]
    return [t.id for t in store.submit_many("evaluate", "vector_add_f32", items, client=client)]


def test_a_batch_does_not_starve_a_single_request_queued_after_it(tmp_path: Path) -> None:
    """Each client's n-th outstanding task goes before anyone's (n+1)-th: a client's single request waits for the
    batch's running task only, and two batches alternate."""
    store = TaskStore(tmp_path / "t.sqlite3")
    batch = _of(store, "10.0.0.1", 4)
    first = store.claim("cuda:0")
    assert first is not None and first.id == batch[0] and first.client == "10.0.0.1"
    (single,) = _of(store, "10.0.0.2", 1)
    other = _of(store, "10.0.0.3", 2)
    order = [store.claim("cuda:0") for _ in range(6)]
    assert [t.id for t in order if t] == [single, other[0], batch[1], other[1], batch[2], batch[3]]


def test_on_one_lane_a_single_request_goes_next_though_the_batchs_running_task_has_finished(
    tmp_path: Path,
) -> None:
    """Equal turns go to the client served longest ago: once the batch's first task is done, its second has the
    same turn as the single request, which still goes first."""
    store = TaskStore(tmp_path / "t.sqlite3")
    batch = _of(store, "10.0.0.1", 3)
    first = store.claim("cpu")
    (single,) = _of(store, "10.0.0.2", 1)
    assert first is not None and store.finish(first.id, first.attempt, TaskStatus.COMPLETED, result={})
    order = [store.claim("cpu") for _ in range(3)]
    assert [t.id for t in order if t] == [single, batch[1], batch[2]]


def test_a_lane_takes_built_work_first_and_a_build_in_progress_before_one_not_started(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3")
    waiting, building, built = _of(store, "a", 3, prebuild=True)
    (triton,) = _of(store, "b", 1)  # nothing to build ahead
    assert [store.claim_build().id, store.claim_build().id] == [waiting, building]  # type: ignore[union-attr]
    store.build_done(waiting)  # the first one built is now ready; the second is still building
    store.build_done("unknown")
    assert store.prebuild_counts() == {Prebuild.WAITING: 1, Prebuild.BUILDING: 1, Prebuild.BUILT: 1}
    claimed = [store.claim("cuda:0") for _ in range(4)]
    assert [t.id for t in claimed if t] == [waiting, triton, building, built]
    assert store.claim_build() is None  # a claimed task is the lane's to build, not the pool's


def test_the_pool_builds_in_the_lanes_fair_order(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3")
    batch = _of(store, "a", 3, prebuild=True)
    (single,) = _of(store, "b", 1, prebuild=True)
    assert [store.claim_build().id for _ in range(4)] == [batch[0], single, batch[1], batch[2]]  # type: ignore[union-attr]


def test_a_restart_starts_unfinished_builds_again_or_forgets_them_without_a_pool(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    first = TaskStore(path, exclusive=False)
    built, building, waiting = _of(first, "a", 3, prebuild=True)
    first.claim_build()
    first.build_done(built)
    first.claim_build()
    TaskStore(path, exclusive=False).recover(build_ahead=True)
    states = {t: TaskStore(path, exclusive=False).get(t).prebuild for t in (built, building, waiting)}  # type: ignore[union-attr]
    assert states == {built: Prebuild.BUILT, building: Prebuild.WAITING, waiting: Prebuild.WAITING}
    TaskStore(path, exclusive=False).recover(build_ahead=False)
    states = {t: TaskStore(path, exclusive=False).get(t).prebuild for t in (built, building, waiting)}  # type: ignore[union-attr]
    assert states == {built: Prebuild.BUILT, building: None, waiting: None}


def test_a_store_of_the_previous_schema_is_migrated_with_its_tasks(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, "
        "status TEXT NOT NULL, definition TEXT NOT NULL, solution TEXT NOT NULL, request TEXT NOT NULL, "
        "result TEXT, error TEXT, lane TEXT, attempt INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL "
        "DEFAULT 0, created_at REAL NOT NULL, started_at REAL, finished_at REAL, expires_at REAL);"
        "INSERT INTO tasks (id, kind, status, definition, solution, request, created_at) "
        "VALUES ('old', 'evaluate', 'pending', 'vector_add_f32', 's', '{}', 1.0);"
        "PRAGMA user_version=1;"
    )
    old.close()
    store = TaskStore(path)
    claimed = store.claim("cpu")
    assert claimed is not None and claimed.id == "old" and claimed.client == "" and claimed.prebuild is None
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_batch_is_queued_all_or_none(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t.sqlite3")
    bad = [Submission("ok", {"i": 0}), Submission(None, {"i": 1})]  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):  # the second row breaks a NOT NULL
        store.submit_many("evaluate", "vector_add_f32", bad, client="a")
    assert store.counts()[TaskStatus.PENDING] == 0
