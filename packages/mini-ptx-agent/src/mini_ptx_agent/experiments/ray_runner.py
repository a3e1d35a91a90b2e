"""Trajectories as Ray tasks (``ptxbench experiment run CONFIG --ray ADDRESS``).

The driver (the ``ptxbench`` process) keeps everything that decides: the plan, which trajectories are left
(read from the run directories, as without Ray), the per-model and total bounds of
:class:`~.runner.ExperimentRunner`, progress, Ctrl-C, the per-turn table and the manifest. Only the work
moves: each launched trajectory is one Ray task that runs :meth:`~.runner.ExperimentRunner.run_one` on some
node of the cluster, writing its run directory as a local run would.

One :class:`ExperimentControl` actor ties the tasks to the driver:

- the evaluation bound: a task's every evaluation takes one of ``2 x lanes`` slots from the actor first, so
  the service's queue stays as short as it is without Ray however many trajectories are in flight;
- the stop flag: after the first Ctrl-C each task's next model call ends its trajectory ``Interrupted``;
- progress: each finished turn is sent to the actor, and the driver drains it into the live display.

What every node needs (checked before the first trajectory, by one small task per node): the same
``ptxbench`` install, the experiment directory at the same path (a shared filesystem), and a route to the
FIBServe URL. Secrets never travel through Ray: the model API keys and ``$FIBSERVE_TOKEN`` are read on the
node, from the environment its ``ray start`` ran in.

Only ``--ray`` imports this module; without it nothing imports Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import ray
from fibserve.ray_driver import RayConnectError, first_line
from fibserve.ray_driver import connect as ray_connect
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..agent import TurnOutcome
from ..runs.summary import RunSummary
from .directory import ExperimentLayout
from .plan import PlannedTrajectory
from .runner import ExperimentRunner, service_token

NAMESPACE = "ptxbench"
"""Ray namespace of an experiment's control actor and tasks."""

TRAJECTORY_CPUS = 0.25
"""CPUs a trajectory's task asks of Ray. A trajectory mostly waits (for its model, for FIBServe), so four share
a core; the driver's ``concurrency`` bound, not Ray's CPUs, decides how many run at once."""


class RayExperimentError(RuntimeError):
    """The Ray cluster cannot run this experiment (unreachable, or a node lacks what trajectories need); the
    message says what to fix. Nothing of the experiment is lost: ``--resume`` continues it."""


@ray.remote(num_cpus=0)
class ExperimentControl:
    """The experiment's shared state on the cluster: evaluation slots, the stop flag and progress events.

    An async actor, so a task waiting for a slot does not block the others' calls."""

    def __init__(self, evaluations: int):
        self._slots = asyncio.Semaphore(evaluations)
        self._held: Counter[str] = Counter()
        self._gone: set[str] = set()
        self._stopping = False
        self._events: list[tuple[str, TurnOutcome]] = []

    async def acquire(self, trajectory_id: str) -> None:
        """Wait for a free evaluation slot, held by ``trajectory_id``."""
        await self._slots.acquire()
        if trajectory_id in self._gone:  # its task ended while this call waited: the slot goes back
            self._slots.release()
            return
        self._held[trajectory_id] += 1

    async def release(self, trajectory_id: str) -> None:
        """Give back a slot ``trajectory_id`` holds."""
        if self._held[trajectory_id] > 0:
            self._held[trajectory_id] -= 1
            self._slots.release()

    async def forget(self, trajectory_id: str) -> None:
        """Give back every slot ``trajectory_id`` still holds: the driver calls it when its task ended, so a
        task whose worker or node died mid-evaluation (or while it waited for one) keeps no slot from the others."""
        self._gone.add(trajectory_id)
        for _ in range(self._held.pop(trajectory_id, 0)):
            self._slots.release()

    async def stop(self) -> None:
        """Ask every trajectory to end at its next model call."""
        self._stopping = True

    async def stopping(self) -> bool:
        """Whether the experiment was asked to stop."""
        return self._stopping

    async def turn(self, trajectory_id: str, outcome: TurnOutcome) -> None:
        """Note a finished turn of ``trajectory_id`` for the driver's progress display."""
        self._events.append((trajectory_id, outcome))

    async def drain(self) -> list[tuple[str, TurnOutcome]]:
        """The turns noted since the last call, oldest first."""
        events, self._events = self._events, []
        return events


class _ActorSlots:
    """The control actor's evaluation slots, held by one trajectory, as the context manager
    :class:`~.runner.ExperimentBackend` takes."""

    def __init__(self, control: Any, trajectory_id: str):
        self.control = control
        self.trajectory_id = trajectory_id

    def __enter__(self) -> None:
        try:
            ray.get(self.control.acquire.remote(self.trajectory_id))
        except RayError as exc:  # the driver's control actor is gone: not the kernel's fault, nor the model's
            from ..environment import EvaluationInfrastructureError

            raise EvaluationInfrastructureError(
                f"the experiment's control actor: {first_line(exc)}"
            ) from None

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(RayError):
            ray.get(self.control.release.remote(self.trajectory_id))


class _ActorStopFlag:
    """The control actor's stop flag as the ``is_set`` the runner's models ask before each call."""

    def __init__(self, control: Any):
        self.control = control

    def is_set(self) -> bool:
        """True once the driver asked to stop, or when its control actor is gone (the driver is too)."""
        try:
            return bool(ray.get(self.control.stopping.remote()))
        except RayError:
            return True


class _TaskSideRunner(ExperimentRunner):
    """The runner inside a trajectory's task: slots, stop flag and progress through the control actor."""

    def __init__(self, *args: Any, control: Any, trajectory_id: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.slots = _ActorSlots(control, trajectory_id)
        self._stop = _ActorStopFlag(control)  # type: ignore[assignment]
        self.noted: list[Any] = []
        """This task's turn notes to the control actor, waited for before the task returns."""
        self.on_turn = lambda t, outcome: self.noted.append(control.turn.remote(t.id, outcome))


@ray.remote(num_cpus=TRAJECTORY_CPUS, max_retries=0)  # a lost task is an error; --resume reruns it
def _trajectory_task(
    setup: dict[str, Any], t: PlannedTrajectory, control: Any
) -> tuple[RunSummary | None, dict[str, Any], str | None]:
    """Run (or resume) trajectory ``t`` on this node: (its summary, the devices its answers named, the
    exception that ended it, if any)."""
    runner = _TaskSideRunner(
        setup["plan"], Path(setup["root"]), url=setup["url"], token=service_token(setup["embedded"]),
        lanes=setup["lanes"], checked=setup["checked"], model_host=setup["model_host"], control=control,
        trajectory_id=t.id,
    )  # fmt: skip
    try:
        ended: tuple[RunSummary | None, str | None] = (runner.run_one(t), None)
    except Exception as exc:  # a bug; run_trajectory recorded it in summary.json when it got that far
        ended = (None, f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(RayError):
        ray.get(runner.noted)  # every turn noted before the driver hears the task ended
    return ended[0], runner.devices, ended[1]


@ray.remote(num_cpus=0)
def _node_check(root: str, url: str) -> dict[str, Any]:
    """What one node sees: the host, whether the experiment's plan.json is there, whether FIBServe answers."""
    import httpx

    seen: dict[str, Any] = {"host": socket.gethostname(), "plan": ExperimentLayout(root).plan_path.is_file()}
    try:
        seen["service"] = httpx.get(f"{url}/health", timeout=10.0).status_code == 200
    except httpx.HTTPError as exc:
        seen["service"] = False
        seen["service_error"] = f"{type(exc).__name__}: {exc}"
    return seen


def connect(address: str) -> None:
    """Join the Ray cluster at ``address`` ('auto', or the head's host:port) as this experiment's driver; the
    runner's Ctrl-C handling stays.

    Raises:
        RayExperimentError: no cluster answers there (said within seconds, see
            :func:`fibserve.ray_driver.connect`).
    """
    try:
        ray_connect(address, NAMESPACE)
    except RayConnectError as exc:
        raise RayExperimentError(str(exc)) from None


def disconnect() -> None:
    """Leave the cluster (the experiment's tasks and its control actor end with the driver)."""
    ray.shutdown()


def check_nodes(root: Path, url: str) -> int:
    """Run one small task on every live node and check that it sees the experiment directory and reaches
    FIBServe; returns the number of nodes.

    Raises:
        RayExperimentError: a node does not see ``root/plan.json`` (not on a shared filesystem at the same path)
            or cannot reach ``url`` (an embedded FIBServe listens on 127.0.0.1 of the driver's host only).
    """
    nodes = [
        n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= TRAJECTORY_CPUS
    ]  # nodes that can run a trajectory
    checks = [
        _node_check.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(str(root.resolve()), url)
        for n in nodes
    ]
    problems = []
    try:
        answers = ray.get(checks, timeout=120)
    except RayError as exc:  # e.g. a node without this install cannot import the check
        raise RayExperimentError(
            f"checking the cluster's nodes failed ({first_line(exc)}): every node needs the same ptxbench "
            "install (pip install 'mini-ptx-agent[ray]')"
        ) from None
    for node, seen in zip(nodes, answers, strict=True):
        where = f"node {node.get('NodeManagerAddress', '?')} ({seen['host']})"
        if not seen["plan"]:
            problems.append(
                f"{where} does not see {root.resolve()}/plan.json: put the experiment directory (--output) on a "
                "filesystem every node mounts at the same path"
            )
        if not seen["service"]:
            problems.append(
                f"{where} cannot reach FIBServe at {url} ({seen.get('service_error', 'no 200 from /health')}): "
                "give --service-url a FIBServe every node can reach (an embedded one listens on 127.0.0.1)"
            )
    if problems:
        raise RayExperimentError("; ".join(problems))
    return len(nodes)


class RayExperimentRunner(ExperimentRunner):
    """:class:`~.runner.ExperimentRunner` whose trajectories are Ray tasks on the connected cluster.

    Takes :class:`~.runner.ExperimentRunner`'s arguments and ``embedded`` (whether ``url`` is an embedded
    FIBServe, which has no token). Bounds, progress callbacks (called on the driver), stop and the result are
    as without Ray. A task whose worker or node dies is an error of its trajectory marked ``infrastructure:``
    (``--resume`` runs it again from its last complete turn)."""

    def __init__(self, *args: Any, embedded: bool, **kwargs: Any):
        super().__init__(*args, **kwargs)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.control = ExperimentControl.options(scheduling_strategy=here).remote(self.evaluation_slots)
        """On the driver's node: it lives and dies with the driver, not with a worker node."""
        self._setup = ray.put(
            {
                "plan": self.plan,
                "root": str(self.layout.root.resolve()),
                "url": self.url,
                "embedded": embedded,
                "lanes": self.lanes,
                "checked": self.checked,
                "model_host": self.model_host,
            }
        )  # fmt: skip  (one copy in the object store, not one per task)
        self._tasks: dict[Any, PlannedTrajectory] = {}
        self._stop_sent = False
        self._by_id: dict[str, PlannedTrajectory] = {t.id: t for t in self.plan.trajectories}

    def launch(self, t: PlannedTrajectory) -> None:
        """Submit trajectory ``t`` as a Ray task."""
        self._tasks[_trajectory_task.remote(self._setup, t, self.control)] = t

    def collect(self, timeout_s: float) -> list[str]:
        """Forward a stop, hand the turns finished since the last call to ``on_turn``, and return the ids of the
        trajectories whose tasks ended (waiting up to ``timeout_s`` s for one)."""
        if self.stopping and not self._stop_sent:
            ray.get(self.control.stop.remote())
            self._stop_sent = True
        ended: list[str] = []
        if self._tasks:
            ready, rest = ray.wait(list(self._tasks), num_returns=1, timeout=timeout_s)
            if ready and rest:
                ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        else:
            ready = []
        self._progress()
        for ref in ready:
            t = self._tasks.pop(ref)
            self.control.forget.remote(t.id)
            summary = None
            try:
                summary, devices, error = ray.get(ref)
                self.devices.update(devices)
            except RayError as exc:  # the task's worker or node died: infrastructure, not a bug of ours
                error = f"infrastructure: {first_line(exc)}"
            if error is not None:
                self.errors[t.id] = error
            if self.on_done is not None:
                self.on_done(t, summary)
            ended.append(t.id)
        return ended

    def run(self) -> int:
        """:meth:`ExperimentRunner.run`; the second Ctrl-C (KeyboardInterrupt) or an error cancels the running
        tasks first, so none writes after the table and the manifest are written."""
        try:
            return super().run()
        except BaseException:
            for ref in list(self._tasks):
                with contextlib.suppress(RayError):
                    ray.cancel(ref, force=True)
            raise

    def _progress(self) -> None:
        """Hand the turns the control actor noted since the last call to ``on_turn`` (on this thread)."""
        try:
            events = ray.get(self.control.drain.remote())
        except RayError as exc:
            raise RayExperimentError(
                f"the experiment's control actor died ({first_line(exc)}); --resume continues the experiment"
            ) from None
        for trajectory_id, outcome in events:
            if self.on_turn is not None:
                self.on_turn(self._by_id[trajectory_id], outcome)
