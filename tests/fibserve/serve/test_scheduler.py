"""Scheduler behaviour that a CPU machine cannot provoke through the real Evaluator: a lane whose device
context broke stops taking tasks, and queued tasks wait for a healthy lane instead of failing; a lane whose
remote worker died (a Ray actor) re-queues its task with the attempt counted."""

from __future__ import annotations

import time
from pathlib import Path

from fibserve.serve.scheduler import LaneLost, Outcome, Scheduler
from fibserve.serve.store import TaskStatus, TaskStore


class _Device:
    """Stands in for an Evaluator whose own CUDA context fails during its first task."""

    def __init__(self) -> None:
        self.healthy = True


def _wait(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def test_a_lane_whose_device_broke_stops_and_leaves_the_queue_alone(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks.sqlite3")
    ran: list[str] = []

    def runner(task, ctx):
        ran.append(task.id)
        ctx.resources.healthy = False  # what Evaluator does when its own context fails
        return Outcome(TaskStatus.FAILED, error={"code": "evaluation_error", "message": "context lost"})

    first = store.submit("evaluate", "d", "s", {}).id
    second = store.submit("evaluate", "d", "s", {}).id
    scheduler = Scheduler(store, ["cuda:0"], runner, lambda device: _Device(), idle_poll_s=0.05)
    scheduler.start()
    try:
        _wait(lambda: not scheduler.health()[0]["healthy"])
        time.sleep(0.3)
        (lane,) = scheduler.health()
        assert "restarted" in lane["detail"] and not lane["busy"]
        assert ran == [first]
        record = store.get(second)
        assert record is not None and record.status is TaskStatus.PENDING  # kept for a healthy lane
    finally:
        scheduler.stop()
        store.close()


def test_each_lane_takes_tasks_from_the_one_queue(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks.sqlite3")
    seen: dict[str, str] = {}

    def runner(task, ctx):
        time.sleep(0.05)
        seen[task.id] = ctx.device
        return Outcome(TaskStatus.COMPLETED, result={"device": ctx.device})

    ids = [store.submit("evaluate", "d", "s", {}).id for _ in range(12)]
    scheduler = Scheduler(store, ["cuda:0", "cuda:1"], runner, lambda device: object(), idle_poll_s=0.05)
    scheduler.start()
    try:
        _wait(lambda: len(seen) == 12)
    finally:
        scheduler.stop()
    assert set(seen.values()) == {"cuda:0", "cuda:1"}  # both lanes worked
    assert all(store.get(i).status is TaskStatus.COMPLETED for i in ids)
    store.close()


def test_each_task_is_logged_when_it_starts_and_when_it_ends(tmp_path: Path, caplog) -> None:
    store = TaskStore(tmp_path / "tasks.sqlite3")

    def runner(task, ctx):
        traces = [
            {"evaluation": {"status": "PASSED"}},
            {"evaluation": {"status": "TIMEOUT"}},
            {"evaluation": None},
        ]
        return Outcome(TaskStatus.COMPLETED, result={"traces": traces})

    task_id = store.submit("evaluate", "gemm_n7168_k5120", "my_kernel", {}).id
    scheduler = Scheduler(store, ["cpu"], runner, lambda device: _Device(), idle_poll_s=0.05)
    with caplog.at_level("INFO", logger="fibserve.serve"):
        scheduler.start()
        try:
            _wait(lambda: store.get(task_id).status is TaskStatus.COMPLETED)
        finally:
            scheduler.stop()
            store.close()
    lines = [r.getMessage() for r in caplog.records if task_id in r.getMessage()]
    assert lines[0].endswith(f"evaluate task {task_id} started (gemm_n7168_k5120, solution my_kernel)")
    assert f"evaluate task {task_id} completed in " in lines[1]
    assert lines[1].endswith(": 1 PASSED, 1 TIMEOUT, 1 not executed")


def test_a_result_the_store_refuses_fails_its_task_and_the_lane_goes_on(tmp_path: Path) -> None:
    import sqlite3

    store = TaskStore(tmp_path / "tasks.sqlite3")
    store._db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 20_000)  # SQLite refuses longer values ("too big")

    def runner(task, ctx):
        size = task.request["log_bytes"]
        return Outcome(TaskStatus.COMPLETED, result={"logs": "x" * size})

    huge = store.submit("evaluate", "d", "s", {"log_bytes": 50_000}).id
    small = store.submit("evaluate", "d", "s", {"log_bytes": 10}).id
    scheduler = Scheduler(store, ["cpu"], runner, lambda device: _Device(), idle_poll_s=0.05)
    scheduler.start()
    try:
        _wait(lambda: store.get(small).status is TaskStatus.COMPLETED)
        (lane,) = scheduler.health()
    finally:
        scheduler.stop()
    record = store.get(huge)
    assert record.status is TaskStatus.FAILED and record.error["code"] == "store_error"
    assert "too big" in record.error["message"] and lane["healthy"]
    store.close()


def test_a_lost_lane_requeues_its_task_for_another_lane_with_the_attempt_counted(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks.sqlite3")

    def runner(task, ctx):
        if ctx.device == "cuda:0":
            raise LaneLost("ActorDiedError: the actor's node died")
        time.sleep(0.05)
        return Outcome(TaskStatus.COMPLETED, result={"device": ctx.device})

    ids = [store.submit("evaluate", "d", "s", {}).id for _ in range(4)]
    scheduler = Scheduler(store, ["cuda:0", "cuda:1"], runner, lambda device: object(), idle_poll_s=0.05)
    scheduler.start()
    try:
        _wait(lambda: all(store.get(i).status is TaskStatus.COMPLETED for i in ids))
        lost = next(lane for lane in scheduler.lanes if lane.device == "cuda:0")
        _wait(lambda: not lost.thread.is_alive())  # a lost lane takes no more tasks
    finally:
        scheduler.stop()
    records = [store.get(i) for i in ids]
    assert all(r.lane == "cuda:1" for r in records)
    assert sorted(r.attempt for r in records) == [1, 1, 1, 2]  # the one lost run counted
    assert "lane lost" in (lost.detail or "") and not lost.healthy
    store.close()


def test_a_task_that_keeps_killing_its_lanes_fails_after_max_attempts(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks.sqlite3", max_attempts=2)

    def runner(task, ctx):
        raise LaneLost("ActorDiedError: the worker was killed")

    task_id = store.submit("evaluate", "d", "s", {}).id
    scheduler = Scheduler(store, ["cuda:0", "cuda:1"], runner, lambda device: object(), idle_poll_s=0.05)
    scheduler.start()
    try:
        _wait(lambda: store.get(task_id).status.is_final)
    finally:
        scheduler.stop()
    record = store.get(task_id)
    assert record.status is TaskStatus.FAILED and record.attempt == 2
    assert record.error["code"] == "lane_lost" and "died 2 times" in record.error["message"]
    store.close()


class _RefusingRequeues(TaskStore):
    """A task store whose first ``refusals`` re-queues fail as SQLite fails on a full disk."""

    def __init__(self, path: Path, refusals: int):
        super().__init__(path)
        self.refusals = refusals

    def requeue(self, task_id: str, attempt: int) -> bool:
        import sqlite3

        if self.refusals > 0:
            self.refusals -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return super().requeue(task_id, attempt)


def test_a_lost_lane_whose_requeue_the_store_refuses_hands_its_task_back_once_it_can(
    tmp_path: Path, monkeypatch
) -> None:
    import fibserve.serve.scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "STORE_RETRY_S", (0.05, 0.1))
    store = _RefusingRequeues(tmp_path / "tasks.sqlite3", refusals=2)

    def runner(task, ctx):
        if ctx.device == "cuda:0":
            raise LaneLost("ActorDiedError: the actor's node died")
        return Outcome(TaskStatus.COMPLETED, result={"device": ctx.device})

    task_id = store.submit("evaluate", "d", "s", {}).id
    scheduler = Scheduler(store, ["cuda:0"], runner, lambda device: object(), idle_poll_s=0.05)
    scheduler.start()
    try:
        _wait(lambda: store.refusals == 0)
        _wait(lambda: store.get(task_id).status is TaskStatus.PENDING)  # handed back, not stranded as running
        (lane,) = scheduler.lanes
        _wait(lambda: not lane.thread.is_alive())
        assert lane.store_problem is None and "lane lost" in (lane.detail or "")
    finally:
        scheduler.stop()
    record = store.get(task_id)
    assert record.status is TaskStatus.PENDING and record.attempt == 1
    store.close()
