"""Scheduler: one queue (the task store), one worker lane per device.

Each lane is a thread that owns its device's resources (an :class:`fibserve.bench.Evaluator`, created in the
lane's own thread so that a CUDA context belongs to it) and repeatedly claims the next pending task from the
store (a fair share per client, built work first: :mod:`fibserve.serve.queue_order`), runs it, and records the
outcome. A task covers all of its workloads on one lane.

Cancel and shutdown reach a running task through its :class:`RunContext`: the context's ``interrupted`` flag
is checked by the task between workloads (``progress`` callback of the evaluator) and every child process
the task registered is killed with its whole process group. On shutdown a running task is put back in the
queue *before* anything is killed, so a result arriving late from an abandoned run is refused by the store
(its attempt number no longer matches).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .store import TaskRecord, TaskStatus, TaskStore

log = logging.getLogger("fibserve.serve")


class TaskInterrupted(Exception):
    """Raised inside a running task when it was cancelled or the server is shutting down."""


class LaneLost(Exception):
    """Raised by a task handler when the lane's remote worker (a Ray actor, or the node under it) died mid-task.

    The lane puts the task back in the queue, its attempt counted as a restart counts it (after
    ``max_attempts`` claims it fails with code ``lane_lost``), and stops: the run that died can never
    deliver a result, so the task still finishes exactly once.
    """


@dataclass
class Outcome:
    """What a task produced: a final status, the kind-specific answer fields, and a task-level error."""

    status: TaskStatus
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None


class RunContext:
    """Handle a running task uses to see cancel/shutdown and to register child processes for killing."""

    def __init__(self, lane: Lane, task: TaskRecord) -> None:
        self.lane = lane
        self.task = task
        self._interrupted = threading.Event()
        self._reason = ""
        self._procs: list[subprocess.Popen[Any]] = []
        self._callbacks: list[Callable[[str], Any]] = []
        self._lock = threading.Lock()

    @property
    def device(self) -> str:
        """The lane's device (``cuda:N`` or ``cpu``)."""
        return self.lane.device

    @property
    def resources(self) -> Any:
        """What the lane's factory built for this device (the Evaluator)."""
        return self.lane.resources

    @property
    def interrupted(self) -> bool:
        """Whether the task was cancelled or the server is stopping."""
        return self._interrupted.is_set()

    def check(self) -> None:
        """Raise :class:`TaskInterrupted` when interrupted (call between units of work)."""
        if self._interrupted.is_set():
            raise TaskInterrupted(self._reason)

    def register(self, proc: subprocess.Popen[Any]) -> None:
        """Kill ``proc``'s process group if the task is interrupted (start it with ``start_new_session``)."""
        with self._lock:
            self._procs.append(proc)
        if self._interrupted.is_set():
            _kill_group(proc)

    def on_interrupt(self, callback: Callable[[str], Any]) -> None:
        """Call ``callback(reason)`` when the task is interrupted (at once if it already was).

        For work that runs elsewhere (a Ray lane forwards the interrupt to its actor).
        """
        with self._lock:
            self._callbacks.append(callback)
        if self._interrupted.is_set():
            _call_quietly(callback, self._reason)

    def interrupt(self, reason: str) -> None:
        """Flag the task, kill its registered process groups and call its interrupt callbacks."""
        self._reason = reason
        self._interrupted.set()
        with self._lock:
            procs, callbacks = list(self._procs), list(self._callbacks)
        for proc in procs:
            _kill_group(proc)
        for callback in callbacks:
            _call_quietly(callback, reason)


def _call_quietly(callback: Callable[[str], Any], reason: str) -> None:
    try:
        callback(reason)
    except Exception:
        log.exception("an interrupt callback failed")


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class TaskHandler(Protocol):
    """Runs one claimed task on a lane; must not raise for candidate failures (those are results)."""

    def __call__(self, task: TaskRecord, ctx: RunContext) -> Outcome: ...


ResourceFactory = Callable[[str], Any]
"""Builds a lane's per-device resources (an Evaluator) from the device string; runs in the lane thread."""

ResourceCloser = Callable[[Any], None]
"""Releases what the factory built."""


STORE_RETRY_S = (1.0, 30.0)
"""First and longest wait (seconds) between attempts to write to a task store that refused a write."""


class Lane:
    """One worker thread bound to one device.

    A store that refuses a write (disk full, read-only file system) never stops the lane: a finished task's
    outcome is kept in memory and written again, with its full result or, when that alone is refused, as
    failed with code ``store_error``, until one of them is stored; meanwhile the lane claims nothing, and
    ``/health`` names the problem (``store_problem``). Once the store takes writes again the lane serves on.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        device: str,
        name: str,
        *,
        node: str | None = None,
        factory: ResourceFactory | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.device = device
        self.name = name
        self.node = node
        """The host the lane's work runs on (a Ray node); None for a lane of this process."""
        self.factory = factory or scheduler.factory
        self.retired = threading.Event()
        """Set when the lane must take no more tasks (its Ray node left the cluster)."""
        self.pid: int | None = None
        """Process id of the lane's remote worker on its node (a Ray lane's actor); None for a local lane."""
        self.lost: str | None = None
        """Why the lane's remote worker died (:class:`LaneLost`); the lane has stopped."""
        self.resources: Any = None
        self.healthy = False
        self.detail: str | None = "starting"
        self.store_problem: str | None = None
        self.unrecorded: tuple[TaskRecord, Outcome, float | None] | None = None
        self.ctx: RunContext | None = None
        self.thread = threading.Thread(target=self._loop, name=f"fibserve-lane-{name}", daemon=True)

    @property
    def busy(self) -> bool:
        """Whether a task is running on this lane."""
        return self.ctx is not None

    @property
    def running(self) -> bool:
        """Whether the lane may take tasks: the server is not stopping and the lane is neither retired nor lost."""
        return not (self.scheduler.stopping.is_set() or self.retired.is_set() or self.lost)

    def _loop(self) -> None:
        sched = self.scheduler
        delay = 5.0
        while self.running:
            try:
                self.resources = self.factory(self.device)
                self.healthy, self.detail = True, None
                break
            except Exception as exc:
                log.exception("lane %s could not start; retrying in %.0f s", self.name, delay)
                self.detail = (
                    f"could not start the evaluator on {self.device} (retrying every {delay:.0f} s): {exc}"
                )
                sched.stopping.wait(delay)
                delay = min(delay * 2, 60.0)
        retry_s = STORE_RETRY_S[0]
        while self.running:
            if self.unrecorded is not None and not self._record(*self.unrecorded):
                sched.stopping.wait(retry_s)
                retry_s = min(retry_s * 2, STORE_RETRY_S[1])
                continue
            try:
                task = sched.store.claim(self.name)
            except Exception as exc:  # a store hiccup (disk full, locked) must not kill the lane
                log.exception("lane %s could not claim a task; retrying", self.name)
                self.store_problem = f"the task store refused to hand out a task ({exc!r}); retrying"
                sched.stopping.wait(retry_s)
                retry_s = min(retry_s * 2, STORE_RETRY_S[1])
                continue
            self.store_problem, retry_s = None, STORE_RETRY_S[0]
            if task is None:
                with sched.wakeup:
                    if self.running:
                        sched.wakeup.wait(timeout=sched.idle_poll_s)
                continue
            self._run(task)
            if self.lost:
                return
            if getattr(self.resources, "healthy", True) is False:
                # The Evaluator's own CUDA context failed: that is sticky for this process, so the lane stops
                # taking tasks (they wait for other lanes, or for a restarted server) instead of failing them all.
                self.healthy = False
                self.detail = (
                    f"the evaluator's CUDA context on {self.device} failed; this lane takes no more tasks until "
                    "the server is restarted (queued tasks are kept)"
                )
                log.error("lane %s: %s", self.name, self.detail)
                return

    def _run(self, task: TaskRecord) -> None:
        sched = self.scheduler
        if task.cancel_requested:  # cancelled while running before a restart: do not start it again
            self._finish(task, _cancelled())
            return
        ctx = RunContext(self, task)
        self.ctx = ctx
        started = time.monotonic()
        log.info(
            "lane %s: %s task %s started (%s, solution %s)", self.name, task.kind, task.id, task.definition,
            task.solution,
        )  # fmt: skip
        try:
            outcome: Outcome | None = sched.handler(task, ctx)
        except TaskInterrupted:
            outcome = None
        except LaneLost as exc:
            self._lose(task, str(exc))
            return
        except Exception as exc:
            log.exception("task %s failed inside the server", task.id)
            outcome = Outcome(
                TaskStatus.FAILED,
                error={
                    "code": "internal_error",
                    "message": f"the server failed while running the task: {exc!r}",
                },
            )
        finally:
            self.ctx = None
        if ctx.interrupted or outcome is None:
            if sched.stopping.is_set():
                return  # interrupted by shutdown: stop() has put it back in the queue
            outcome = _cancelled()
        # A task that finished while the server was stopping is recorded unless stop() re-queued it first
        # (then the store refuses the result and the next server runs it again).
        self._finish(task, outcome, started)

    def _lose(self, task: TaskRecord, why: str) -> None:
        """The lane's remote worker died running ``task``: re-queue it (or fail it after ``max_attempts``).

        The lane takes no more tasks, but its thread stays until the task is handed back: a store that refuses
        the write (a full disk) is retried as the loop retries (:data:`STORE_RETRY_S`), with ``/health`` saying
        why, so the task is never left ``running`` until a restart."""
        sched = self.scheduler
        self.lost = self.detail = f"lane lost: {why}"
        self.healthy = False
        log.error("lane %s lost while running task %s: %s", self.name, task.id, why)
        retry_s = STORE_RETRY_S[0]
        while not sched.stopping.is_set():  # stopping: stop() puts it back in the queue
            if self._hand_back(task, why):
                self.store_problem = None
                return
            sched.stopping.wait(retry_s)
            retry_s = min(retry_s * 2, STORE_RETRY_S[1])

    def _hand_back(self, task: TaskRecord, why: str) -> bool:
        """One try at re-queueing (or failing) the task of a lost lane; True once the store has it."""
        store = self.scheduler.store
        if task.attempt >= store.max_attempts:
            outcome = Outcome(
                TaskStatus.FAILED,
                error={
                    "code": "lane_lost",
                    "message": (
                        f"the lane running this task died {task.attempt} times (last: {why}); it was not retried "
                        "again (the task may kill its worker; check its inputs or the lane logs)"
                    ),
                },
            )
            self.unrecorded = (task, outcome, None)
            return self._record(task, outcome, None)
        try:
            requeued = store.requeue(task.id, task.attempt)
        except Exception as exc:
            log.exception("lane %s: the task store refused to re-queue task %s", self.name, task.id)
            self.store_problem = (
                f"the task store refused to re-queue task {task.id} of this lost lane ({exc!r}): free space or fix "
                "the state directory; it is tried again"
            )
            return False
        if requeued:
            log.warning("task %s re-queued after attempt %d (lane %s lost)", task.id, task.attempt, self.name)
            self.scheduler.notify()
        return True

    def _finish(self, task: TaskRecord, outcome: Outcome, started: float | None = None) -> None:
        self.unrecorded = (task, outcome, started)
        self._record(task, outcome, started)

    def _record(self, task: TaskRecord, outcome: Outcome, started: float | None) -> bool:
        """Store the outcome of ``task`` (see the class docstring); True once it is stored or moot."""
        store = self.scheduler.store
        try:
            recorded = store.finish(task.id, task.attempt, outcome.status, result=outcome.result,
                                    error=outcome.error)  # fmt: skip
        except Exception as exc:
            log.exception("lane %s: the task store refused the result of task %s", self.name, task.id)
            outcome = _store_error(exc)
            try:
                recorded = store.finish(task.id, task.attempt, outcome.status, error=outcome.error)
            except Exception:
                self.store_problem = (
                    f"the task store refused to record task {task.id} ({exc!r}): free space or fix the state "
                    "directory; the result is kept in memory and written again, and no new task starts until then"
                )
                return False
        self.unrecorded, self.store_problem = None, None
        if recorded:
            took = f" in {time.monotonic() - started:.2f} s" if started is not None else ""
            log.info("lane %s: %s task %s %s%s%s", self.name, task.kind, task.id, outcome.status.value, took,
                     _outcome_summary(outcome))  # fmt: skip
            self.scheduler.notify_finished(task.id)
        return True


def _outcome_summary(outcome: Outcome) -> str:
    """``": 2 PASSED, 1 TIMEOUT"`` from the traces of a result, or ``": <error code>"``, for the log line."""
    if outcome.error:
        return f": {outcome.error.get('code', 'error')}"
    counts: dict[str, int] = {}
    for trace in (outcome.result or {}).get("traces") or []:
        evaluation = trace.get("evaluation") if isinstance(trace, dict) else None
        status = evaluation.get("status", "?") if isinstance(evaluation, dict) else "not executed"
        counts[status] = counts.get(status, 0) + 1
    return (": " + ", ".join(f"{n} {status}" for status, n in counts.items())) if counts else ""


def _store_error(exc: Exception) -> Outcome:
    return Outcome(
        TaskStatus.FAILED,
        error={
            "code": "store_error",
            "message": f"the task ran, but the server could not store its result ({exc!r}); submit it again",
        },
    )


def _cancelled() -> Outcome:
    return Outcome(
        TaskStatus.FAILED,
        error={"code": "cancelled", "message": "the task was cancelled by a DELETE request while running"},
    )


class Scheduler:
    """Runs tasks from ``store`` on one lane per device.

    Args:
        store: the durable queue.
        devices: lane devices, e.g. ``["cuda:0", "cuda:1"]`` or ``["cpu"]``; a device may repeat (two lanes
            sharing it, e.g. ``cpu`` twice on a many-core host).
        handler: runs one task.
        factory: builds a lane's resources for its device (called in the lane thread).
        closer: releases them on stop.
        on_finish: called (from a lane thread) with a task id when its final answer is stored.
        idle_poll_s: how often an idle lane re-reads the store even without a wake-up (seconds).
    """

    dynamic_lanes = False
    """Whether lanes are added while the server runs (:meth:`add_lane`) instead of one per device at start."""

    def __init__(
        self,
        store: TaskStore,
        devices: list[str],
        handler: TaskHandler,
        factory: ResourceFactory,
        closer: ResourceCloser | None = None,
        on_finish: Callable[[str], None] | None = None,
        idle_poll_s: float = 2.0,
    ) -> None:
        if not devices and not self.dynamic_lanes:
            raise ValueError("the scheduler needs at least one device")
        self.store = store
        self.handler = handler
        self.factory = factory
        self.closer = closer
        self.on_finish = on_finish
        self.idle_poll_s = idle_poll_s
        self.stopping = threading.Event()
        self.wakeup = threading.Condition()
        names: dict[str, int] = {}
        self._lanes: list[Lane] = []
        self._lanes_lock = threading.Lock()
        for device in devices:
            count = names.get(device, 0)
            names[device] = count + 1
            self._lanes.append(Lane(self, device, device if count == 0 else f"{device}#{count}"))

    @property
    def lanes(self) -> list[Lane]:
        """The current lanes (a copy: lanes of a Ray cluster come and go while the server runs)."""
        with self._lanes_lock:
            return list(self._lanes)

    def add_lane(self, lane: Lane) -> None:
        """Add ``lane`` and start its thread (unless the server is stopping)."""
        with self._lanes_lock:
            if self.stopping.is_set():
                return
            self._lanes.append(lane)
        lane.thread.start()

    def remove_lane(self, lane: Lane) -> None:
        """Forget ``lane`` (its thread has ended, or it is retired and will end after its current task)."""
        with self._lanes_lock:
            if lane in self._lanes:
                self._lanes.remove(lane)

    def start(self) -> None:
        """Start every lane thread."""
        for lane in self.lanes:
            lane.thread.start()

    def notify(self) -> None:
        """Wake idle lanes (call after a submission)."""
        with self.wakeup:
            self.wakeup.notify_all()

    def notify_finished(self, task_id: str) -> None:
        """Tell long-pollers that ``task_id`` has its final answer."""
        if self.on_finish is not None:
            try:
                self.on_finish(task_id)
            except Exception:
                log.exception("on_finish callback failed for %s", task_id)

    def interrupt(self, task_id: str, reason: str = "cancelled") -> bool:
        """Interrupt ``task_id`` if a lane is running it; returns whether one was."""
        for lane in self.lanes:
            ctx = lane.ctx
            if ctx is not None and ctx.task.id == task_id:
                ctx.interrupt(reason)
                return True
        return False

    def stop(self, join_timeout_s: float = 10.0) -> list[str]:
        """Stop taking tasks, re-queue running ones, interrupt them, release resources.

        Returns:
            Ids of the tasks that were running and are pending again.
        """
        with self._lanes_lock:
            self.stopping.set()
        self.notify()
        requeued = []
        for lane in self.lanes:
            ctx = lane.ctx
            if ctx is not None and self.store.requeue(ctx.task.id, ctx.task.attempt):
                requeued.append(ctx.task.id)
        for lane in self.lanes:
            ctx = lane.ctx
            if ctx is not None:
                ctx.interrupt("server shutting down")
        for lane in self.lanes:
            if lane.resources is not None and self.closer is not None:
                try:
                    self.closer(lane.resources)
                except Exception:
                    log.exception("closing lane %s failed", lane.name)
        for lane in self.lanes:
            if lane.thread.is_alive():
                lane.thread.join(timeout=join_timeout_s / max(1, len(self.lanes)))
        return requeued

    def health(self) -> list[dict[str, Any]]:
        """Each lane as ``{device, node, pid, healthy, busy, task_id, detail}``."""
        out = []
        for lane in self.lanes:
            ctx = lane.ctx
            alive = lane.thread.is_alive() or not lane.thread.ident
            detail = lane.detail if alive else (lane.detail or "lane thread stopped")
            out.append(
                {
                    "device": lane.name,
                    "node": lane.node,
                    "pid": lane.pid,
                    "healthy": lane.healthy and alive and lane.store_problem is None,
                    "busy": ctx is not None,
                    "task_id": ctx.task.id if ctx is not None else None,
                    "detail": lane.store_problem or detail,
                }
            )
        return out
