"""Scheduler behaviour that a CPU machine cannot provoke through the real Evaluator: a lane whose device
context broke stops taking tasks, and queued tasks wait for a healthy lane instead of failing."""

from __future__ import annotations

import time
from pathlib import Path

from fibserve.serve.scheduler import Outcome, Scheduler
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
