"""Lanes on a Ray cluster (``fibserve serve --ray ADDRESS``): one actor per GPU, all fed from the one queue.

The front door stays in the server process: HTTP, the durable task store and the scheduler. Only the work
moves. Each lane is still a :class:`fibserve.serve.scheduler.Lane` thread of the server, but its resources
are a :class:`LaneActor` on a Ray node: the thread claims the next pending task from the store, hands it
to its actor, waits for the outcome and records it. Claims, attempts, cancel (forwarded to the actor) and
shutdown (running tasks re-queued first) therefore behave exactly as for the lanes of a single server. The
actor holds what a local lane holds: an Evaluator with its warm sandbox workers, and its host's build cache.

Membership: a watcher thread reads the cluster's nodes every ``poll_s`` seconds and keeps one lane per unit
of the lane resource on each live node (``GPU``, or :data:`CPU_LANE_RESOURCE` for CPU lanes), each actor
pinned to its node. A node that joins gets lanes; a node that leaves has its lanes retired. A lane whose
actor dies mid-task (the actor's process or its whole node killed) raises
:class:`fibserve.serve.scheduler.LaneLost`: the task goes back to the queue with its attempt counted, as a
restart does, and the watcher starts a fresh lane where the node still has room. The dead run can never
deliver a result (the store accepts one outcome per claim), so every accepted task finishes exactly once.

Only ``serve --ray`` imports this module; nothing else in fibserve imports Ray.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fibserve.ray_driver import connect, first_line

from .scheduler import Lane, LaneLost, Outcome, RunContext, Scheduler, TaskInterrupted
from .settings import ServeSettings
from .store import TaskRecord, TaskStatus, TaskStore

log = logging.getLogger("fibserve.serve")

CPU_LANE_RESOURCE = "fibserve_cpu_lane"
"""Custom Ray resource a node offers per CPU lane (``ray start --resources '{"fibserve_cpu_lane": 2}'``).

CPU lanes (``serve --ray ... --devices cpu``) are for tests and machines without GPUs; each takes one unit of
it and one CPU, so a node runs only as many CPU lanes as its operator allowed."""

NAMESPACE = "fibserve"
"""Ray namespace of the lane actors (named after their lanes, so an operator can find them)."""

_LOST = (RayActorError, ActorUnavailableError)
"""What ``ray.get`` raises when an actor's process or node died (ActorDiedError is a RayActorError)."""


@dataclass
class _ActorSideLane:
    """What a :class:`RunContext` reads of its lane, inside the actor: the device and the Evaluator."""

    device: str
    resources: Any


class LaneActor:
    """One lane's work on its Ray node: a :class:`fibserve.serve.work.TaskWork` and an Evaluator.

    A plain class; :class:`RayScheduler` makes it a Ray actor (threaded, ``max_concurrency=2``, so that
    :meth:`interrupt` reaches a running :meth:`run`). Scratch files of tool runs go to a node-local
    temporary folder, not to the front door's state directory.

    Args:
        settings: the front door's settings (trace-set roots must be at the same paths on every node).
        device: ``cuda:0`` (Ray sets ``CUDA_VISIBLE_DEVICES`` to the lane's GPU) or ``cpu``.
    """

    def __init__(self, settings: ServeSettings, device: str) -> None:
        from fibserve import sandbox
        from fibserve.datasets.catalog import Catalog
        from fibserve.tools.executables import ToolPaths

        from . import work

        if settings.unsafe_no_sandbox:
            sandbox.allow_unsafe()
        scratch = Path(tempfile.mkdtemp(prefix="fibserve-lane-"))
        settings = settings.model_copy(update={"state_dir": scratch})
        catalog = Catalog.load(settings.roots)
        self.device = device
        self.work = work.TaskWork(catalog, settings, ToolPaths.discover())
        self.evaluator = work.evaluator_factory(settings, catalog.roots)(device)
        self.ctx: RunContext | None = None

    def ready(self) -> dict[str, Any]:
        """``{pid, device}`` once the Evaluator is up (the front door waits on it before claiming tasks)."""
        return {"pid": os.getpid(), "device": self.device}

    def run(self, task: TaskRecord) -> dict[str, Any] | None:
        """Run ``task``; ``{status, result, error}`` of its outcome, or None when it was interrupted."""
        ctx = RunContext(_ActorSideLane(self.device, self.evaluator), task)  # type: ignore[arg-type]
        self.ctx = ctx
        try:
            outcome = self.work(task, ctx)
        except TaskInterrupted:
            return None
        finally:
            self.ctx = None
        if ctx.interrupted:
            return None
        return {"status": outcome.status.value, "result": outcome.result, "error": outcome.error}

    def interrupt(self, task_id: str, reason: str) -> None:
        """Interrupt the running task if it is ``task_id`` (cancel, or the front door stopping)."""
        ctx = self.ctx
        if ctx is not None and ctx.task.id == task_id:
            ctx.interrupt(reason)

    def close(self) -> None:
        """Release the Evaluator's worker processes."""
        from . import work

        work.close_evaluator(self.evaluator)


@dataclass
class RemoteLane:
    """The front door's handle on a lane's actor (what a Ray lane's ``resources`` are)."""

    actor: Any
    """The ``ray.actor.ActorHandle`` of the :class:`LaneActor`."""
    pid: int
    """The actor's process id on its node."""


def run_on_actor(task: TaskRecord, ctx: RunContext) -> Outcome:
    """The task handler of Ray lanes: run ``task`` on the lane's actor and wait for its outcome.

    Raises:
        LaneLost: the actor's process or node died (the lane re-queues the task).
        TaskInterrupted: the task was cancelled or the server is stopping.
    """
    remote: RemoteLane = ctx.resources
    ref = remote.actor.run.remote(task)
    ctx.on_interrupt(lambda reason: remote.actor.interrupt.remote(task.id, reason))
    try:
        answer = ray.get(ref)
    except _LOST as exc:
        # ActorUnavailableError can mean unreachable for now, not dead: kill the actor, so it neither finishes the
        # task a second time nor keeps its GPU from the lane that replaces it.
        with contextlib.suppress(Exception):
            ray.kill(remote.actor, no_restart=True)
        raise LaneLost(first_line(exc)) from None
    if answer is None:
        raise TaskInterrupted("interrupted on the lane's actor")
    return Outcome(TaskStatus(answer["status"]), answer["result"] or {}, answer["error"])


def close_remote(remote: RemoteLane) -> None:
    """Let the actor release its workers (10 s at most), then kill it."""
    try:
        ray.get(remote.actor.close.remote(), timeout=10)
    except Exception:
        log.warning("a lane actor did not close cleanly; killing it")
    ray.kill(remote.actor, no_restart=True)


class RayLane(Lane):
    """A lane whose work runs on a :class:`LaneActor` pinned to one Ray node."""

    def __init__(self, scheduler: RayScheduler, node_id: str, node: str, slot: int) -> None:
        kind = "gpu" if scheduler.gpu else "cpu"
        super().__init__(
            scheduler,
            "cuda:0" if scheduler.gpu else "cpu",
            f"{node}/{kind}#{slot}",
            node=node,
            factory=self._start_actor,
        )
        self.node_id = node_id
        self.slot = slot
        self.settings = scheduler.settings

    def _start_actor(self, device: str) -> RemoteLane:
        """Create this lane's actor on its node and wait until its Evaluator is up (runs in the lane thread).

        Raises:
            RuntimeError: the lane was retired or the server stopped before the actor was ready.
            ray.exceptions.RayActorError: the actor died while starting (its node left; retried by the lane).
        """
        resources: dict[str, Any] = (
            {"num_gpus": 1, "num_cpus": 1}
            if device != "cpu"
            else {"num_cpus": 1, "resources": {CPU_LANE_RESOURCE: 1}}
        )
        actor = (
            ray.remote(LaneActor)
            .options(
                name=f"{self.name}@{id(self):x}",
                namespace=NAMESPACE,
                max_restarts=0,
                max_concurrency=2,
                scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False),
                **resources,
            )
            .remote(self.settings, device)
        )
        ready = actor.ready.remote()
        while True:
            try:
                info = ray.get(ready, timeout=1.0)
                break
            except GetTimeoutError:
                if not self.running:
                    ray.kill(actor, no_restart=True)
                    raise RuntimeError(f"lane {self.name} was retired before its actor started") from None
        self.pid = int(info["pid"])
        log.info("lane %s: actor pid %s ready on node %s", self.name, self.pid, self.node_id)
        return RemoteLane(actor, self.pid)


class RayScheduler(Scheduler):
    """A :class:`fibserve.serve.scheduler.Scheduler` whose lanes are actors on a Ray cluster.

    Args:
        store: the durable queue (on the front door's disk).
        settings: the server's settings; ``settings.ray_address`` is the cluster (``auto`` or ``host:port``)
            and ``settings.devices == ["cpu"]`` asks for CPU lanes instead of GPU lanes.
        on_finish: called with a task id when its final answer is stored.
        poll_s: how often the watcher reads the cluster's nodes (seconds).
        idle_poll_s: how often an idle lane re-reads the store without a wake-up (seconds).

    Raises (from :meth:`start`):
        RuntimeError: no Ray cluster answers at ``settings.ray_address``.
    """

    dynamic_lanes = True

    def __init__(
        self,
        store: TaskStore,
        settings: ServeSettings,
        *,
        on_finish: Any = None,
        poll_s: float = 1.0,
        idle_poll_s: float = 2.0,
    ) -> None:
        super().__init__(
            store,
            [],
            run_on_actor,
            self._no_factory,
            close_remote,
            on_finish=on_finish,
            idle_poll_s=idle_poll_s,
        )
        self.settings = settings
        self.gpu = settings.devices != ["cpu"]
        self.resource = "GPU" if self.gpu else CPU_LANE_RESOURCE
        self.poll_s = poll_s
        self._watcher = threading.Thread(target=self._watch, name="fibserve-ray-watcher", daemon=True)

    @staticmethod
    def _no_factory(device: str) -> Any:
        raise AssertionError("Ray lanes start their own actors")  # every RayLane brings its factory

    def start(self) -> None:
        """Connect to the cluster and start the watcher (which starts the lanes)."""
        address = self.settings.ray_address
        # The server's own signal handlers (uvicorn's graceful shutdown, which re-queues running tasks) stay.
        connect(address, NAMESPACE)
        log.info("connected to the Ray cluster at %s; lanes take one %s each", address, self.resource)
        self._reconcile()
        self._watcher.start()

    def _watch(self) -> None:
        while not self.stopping.wait(self.poll_s):
            try:
                self._reconcile()
            except Exception:
                log.exception("reading the Ray cluster's nodes failed; retrying")

    def _reconcile(self) -> None:
        """Retire the lanes of nodes that left, forget lanes that ended, start lanes on free slots."""
        nodes = {node["NodeID"]: node for node in ray.nodes() if node.get("Alive")}
        lanes = [lane for lane in self.lanes if isinstance(lane, RayLane)]
        for lane in lanes:
            if lane.thread.ident and not lane.thread.is_alive():
                self.remove_lane(lane)
            elif lane.node_id not in nodes and not lane.retired.is_set():
                log.warning("Ray node %s left the cluster: retiring lane %s", lane.node, lane.name)
                lane.retired.set()
                self.notify()
        taken = {(lane.node_id, lane.slot) for lane in self.lanes if isinstance(lane, RayLane)}
        for node_id, node in nodes.items():
            slots = int(node.get("Resources", {}).get(self.resource, 0))
            label = f"{node.get('NodeManagerAddress', '?')}/{node_id[:8]}"
            for slot in range(slots):
                if (node_id, slot) not in taken:
                    log.info("starting lane %s/%s#%d", label, "gpu" if self.gpu else "cpu", slot)
                    self.add_lane(RayLane(self, node_id, label, slot))

    def stop(self, join_timeout_s: float = 10.0) -> list[str]:
        """Stop as :meth:`Scheduler.stop` does (running tasks re-queued first), kill the actors, disconnect."""
        requeued = super().stop(join_timeout_s)
        if self._watcher.is_alive():
            self._watcher.join(timeout=join_timeout_s)
        ray.shutdown()
        return requeued
