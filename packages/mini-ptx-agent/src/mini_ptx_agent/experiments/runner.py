"""Running an experiment: its trajectories concurrently, each through `ptxbench run`'s machinery, resumably.

:func:`run_experiment` starts (or reaches) the service, checks every model once, then runs the plan's pending and
unfinished trajectories (:mod:`.directory`) in threads, each :func:`~mini_ptx_agent.runs.launch.run_trajectory`
in its own run directory. The work is I/O bound (waiting for a model or for FIBServe), so threads suffice.
Three bounds hold at once:

- at most ``concurrency`` trajectories in flight (default twice the service's lanes);
- at most ``ModelSpec.concurrency`` trajectories of one model (an API's rate limit);
- at most twice the service's lanes evaluations in flight (one running and one queued per lane keeps every lane
  busy, and keeps each evaluation's wait in the service's queue short, well inside its time limit).

Stopping: :meth:`ExperimentRunner.stop` (the first Ctrl-C) starts no new trajectory and ends each running one at
its next model call with exit status ``Interrupted``; a second Ctrl-C (or SIGKILL) leaves at once, losing at most
the turns in flight, whose replies resume asks again. Either way `--resume` continues without repeating a
finished turn (:meth:`mini_ptx_agent.agent.KernelAgent.resume`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # mini-swe-agent prints a banner to stdout on import

from minisweagent.exceptions import InterruptAgentFlow

from ..environment.fibserve import FIBServeBackend
from ..models import ModelUnavailableError
from ..models.bounded import exit_message
from ..runs.directory import RunLayout, RunPlan, load_plan
from ..runs.launch import run_trajectory
from ..runs.summary import RunSummary, failed_summary
from ..task import TaskConfig
from ..trajectory import write_json
from .config import ExperimentConfig, ModelSpec
from .directory import ExperimentLayout, trajectory_state
from .plan import ExperimentPlan, PlannedTrajectory

EVALUATIONS_PER_LANE = 2
"""Evaluations in flight per service lane: one running, one queued."""


class Interrupted(InterruptAgentFlow):
    """Ends a trajectory at its next model call after the experiment was asked to stop (exit ``Interrupted``)."""


class ExperimentBackend(FIBServeBackend):
    """:class:`FIBServeBackend` whose evaluations wait for a slot (the lanes bound) and whose task answers'
    device information (GPU, driver, clocks per lane) is kept for the manifest."""

    def __init__(self, url: str, *, token: str | None, slots: threading.BoundedSemaphore, devices: dict):
        super().__init__(url, token=token)
        self.slots = slots
        self.devices = devices

    def evaluate(self, solution: Any, task: TaskConfig) -> Any:
        with self.slots:
            return super().evaluate(solution, task)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self.client.close()

    def _finished(self, what: str, task_id: str, timeout_s: float) -> Any:
        answer = super()._finished(what, task_id, timeout_s)
        if answer.device_info:
            self.devices[answer.device or "?"] = answer.device_info
        return answer


class _Stoppable:
    """A model whose next ``query`` raises :class:`Interrupted` once ``stop`` is set."""

    def __init__(self, model: Any, stop: threading.Event):
        self._model = model
        self._stop = stop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        if self._stop.is_set():
            raise Interrupted(
                exit_message("Interrupted", "the experiment was stopped; --resume continues here")
            )
        return self._model.query(messages, **kwargs)


def make_model_for(
    spec: ModelSpec,
    config: ExperimentConfig,
    model_host: str | None,
    seed: int | None = None,
    *,
    check: bool = False,
    task: tuple[str, str] | None = None,
) -> Any:
    """The model of ``spec`` for one trajectory of ``config`` (``seed`` sent as ``extra_body.seed``; the
    config's ``models_config``), each request capped at its turn timeout; ``check``: verify an endpoint's served
    id (once per experiment is enough); ``task``: the trajectory's (definition, language), which the model
    ``demo`` replays the bundled demo of.

    Raises:
        ModelConfigError: misconfigured (the message says what to set).
        ModelUnavailableError: ``check`` and the endpoint does not answer.
    """
    from ..models import make_model

    sampling = dict(spec.sampling)
    if seed is not None:
        sampling["extra_body"] = {**sampling.get("extra_body", {}), "seed": seed}
    definition, language = task or (None, None)
    return make_model(
        spec.name, model_host=spec.host or model_host, config=config.models_config, sampling=sampling,
        request_timeout_s=config.turn_timeout_s, check_served_id=check, definition=definition, language=language,
    )  # fmt: skip


@dataclass
class ModelChecks:
    """Each model built once before an experiment starts."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Model name -> what the manifest records (type, config with sampling and price, demo), secrets scrubbed."""
    unavailable: dict[str, str] = field(default_factory=dict)
    """Model name -> why its API did not answer; its trajectories end as ``InfrastructureError`` without a call."""


def check_models(plan: ExperimentPlan, model_host: str | None) -> ModelChecks:
    """Build each model of ``plan`` once (an endpoint's served id checked; the model ``demo`` once per
    definition and language it is planned for, each needing a bundled demo) and record its settings.

    Raises:
        ModelConfigError: a model is misconfigured (the message says what to set).
    """
    from ..demo import DEMO_MODEL_NAMES
    from ..models import ModelUnavailableError
    from ..models.base import is_demo_model
    from ..trajectory import scrub

    config = plan.config
    checks = ModelChecks()
    for spec in config.models:
        tasks = sorted({(t.definition, t.language) for t in plan.trajectories if t.model == spec.name})
        try:
            if spec.name in DEMO_MODEL_NAMES:
                for task in tasks[1:]:
                    make_model_for(spec, config, model_host, task=task)
            model = make_model_for(spec, config, model_host, check=True, task=tasks[0] if tasks else None)
        except ModelUnavailableError as exc:
            checks.unavailable[spec.name] = f"model API unavailable: {exc}"
            checks.records[spec.name] = {"name": spec.name, "unavailable": str(exc)}
            continue
        checks.records[spec.name] = scrub(
            {"name": spec.name, "demo": is_demo_model(model), "type": type(model).__name__,
             "config": model.config.model_dump(mode="json")}
        )  # fmt: skip
    return checks


@dataclass
class ExperimentResult:
    """What one `ptxbench experiment run` did."""

    root: Path
    trajectories: int
    """Trajectories in the plan."""
    ran: int = 0
    """Trajectories run (or resumed) by this invocation."""
    finished: int = 0
    """Finished trajectories in the directory afterwards."""
    unfinished: list[str] = field(default_factory=list)
    """Ids still to run (infrastructure failure, interrupted, crashed): `--resume` runs them."""
    interrupted: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    """Trajectory id -> the exception that ended its run (a bug to report; `--resume` runs it again)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "experiment_dir": str(self.root), "trajectories": self.trajectories, "ran": self.ran,
            "finished": self.finished, "unfinished": self.unfinished, "interrupted": self.interrupted,
            "errors": self.errors,
        }  # fmt: skip


class ExperimentRunner:
    """Runs the unfinished trajectories of ``plan`` in ``root`` against the service at ``url``.

    ``lanes``: the service's healthy lanes; ``checked``: :func:`check_models`' result; ``on_turn(trajectory, outcome)`` and ``on_done(trajectory,
    summary)`` are called from worker threads (progress); ``model_host``: the default endpoint of models
    without ``host``.
    """

    def __init__(
        self, plan: ExperimentPlan, root: Path, *, url: str, token: str | None, lanes: int, checked: ModelChecks,
        model_host: str | None = None, on_turn: Any = None, on_done: Any = None,
    ):  # fmt: skip
        self.plan = plan
        self.layout = ExperimentLayout(root)
        self.url = url
        self.token = token
        config = plan.config
        self.lanes = lanes
        self.concurrency = config.concurrency or max(1, 2 * lanes)
        self.evaluation_slots = max(1, EVALUATIONS_PER_LANE * lanes)
        """Evaluations in flight at most, over all trajectories."""
        self.slots: Any = threading.BoundedSemaphore(self.evaluation_slots)
        """Taken around each evaluation (a context manager)."""
        self.model_host = model_host
        self.on_turn = on_turn
        self.on_done = on_done
        self.devices: dict[str, Any] = {}
        """Lane -> the latest task answer's ``device_info`` (GPU, driver, clocks)."""
        self.checked = checked
        self._specs = {m.name: m for m in config.models}
        self._stop = threading.Event()
        self.errors: dict[str, str] = {}
        """Trajectory id -> the exception that ended its run (a bug, not a verdict)."""
        self._done: queue.Queue[str] = queue.Queue()

    # -- one trajectory -------------------------------------------------------------------------------------

    def run_plan(self, t: PlannedTrajectory, run_dir: Path) -> RunPlan:
        """The :class:`RunPlan` of trajectory ``t`` (a resumed one keeps its ``created_at``)."""
        config = self.plan.config
        created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        if RunLayout(run_dir).plan_path.is_file():
            with contextlib.suppress(OSError, ValueError):
                created = load_plan(run_dir).created_at
        task = TaskConfig(
            definition=t.definition, workloads=t.workloads, language=t.language, arch=config.arch,
            target_speedup=config.target_speedup,
        )  # fmt: skip
        return RunPlan(
            run_id=t.id, created_at=created, task=task, model=t.model, prompt_tag=t.prompt_tag,
            num_turns=self.plan.num_turns, wall_time_limit_s=config.wall_time_limit_s,
            turn_timeout_s=config.turn_timeout_s, service=self.url, feedback=config.feedback,
        )  # fmt: skip

    def make_model(self, t: PlannedTrajectory) -> Any:
        """The model of trajectory ``t`` (:func:`make_model_for` with its seed).

        Raises:
            ModelUnavailableError: its API does not answer.
        """
        return make_model_for(
            self._specs[t.model], self.plan.config, self.model_host, t.seed, task=(t.definition, t.language)
        )

    def make_backend(self) -> ExperimentBackend:
        """The evaluation backend of one trajectory (its own HTTP connection pool; the shared slots)."""
        return ExperimentBackend(self.url, token=self.token, slots=self.slots, devices=self.devices)

    def run_one(self, t: PlannedTrajectory) -> RunSummary:
        """Run or resume trajectory ``t`` in ``runs/<id>/``; returns its summary (also in summary.json)."""
        run_dir = self.layout.run_dir(t.id)
        resume = trajectory_state(run_dir, self.plan.num_turns) == "unfinished"
        layout = RunLayout(run_dir)
        layout.summary_path.unlink(missing_ok=True)  # a summary means "this run ended", never "it is running"
        plan = self.run_plan(t, run_dir)
        started = time.time()
        failure = self.checked.unavailable.get(t.model)
        if failure is None:
            try:
                model = self.make_model(t)
            except ModelUnavailableError as exc:
                failure = f"model API unavailable: {exc}"
        if failure is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            summary = failed_summary(plan, "InfrastructureError", failure, started, resumed=resume)
            write_json(layout.plan_path, plan.model_dump(mode="json"))
            write_json(layout.summary_path, summary.model_dump(mode="json"))
            return summary
        backend = self.make_backend()
        on_turn = (lambda outcome: self.on_turn(t, outcome)) if self.on_turn else None
        try:
            return run_trajectory(
                plan,
                run_dir,
                backend=backend,
                model=_Stoppable(model, self._stop),
                resume=resume,
                on_turn=on_turn,
            )
        finally:
            backend.close()

    # -- the whole plan -------------------------------------------------------------------------------------

    def todo(self) -> list[PlannedTrajectory]:
        """The trajectories not finished, in plan order."""
        return [
            t for t in self.plan.trajectories
            if trajectory_state(self.layout.run_dir(t.id), self.plan.num_turns) != "finished"
        ]  # fmt: skip

    def stop(self) -> None:
        """Start no new trajectory; end each running one at its next model call (``Interrupted``)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> int:
        """Run every unfinished trajectory within the bounds; returns how many were started.

        A trajectory that raises (a bug) is recorded in its summary by ``run_trajectory`` and counted as
        unfinished; the others go on.
        """
        pending = self.todo()
        running: dict[str, str] = {}  # id -> model
        started = 0
        while pending or running:
            while pending and not self._stop.is_set() and len(running) < self.concurrency:
                t = self._next(pending, running)
                if t is None:
                    break
                pending.remove(t)
                running[t.id] = t.model
                started += 1
                self.launch(t)
            if self._stop.is_set() and not running:
                break
            for finished in self.collect(timeout_s=0.5):
                running.pop(finished, None)
        return started

    def launch(self, t: PlannedTrajectory) -> None:
        """Start trajectory ``t`` (here: a thread running :meth:`run_one`); :meth:`collect` reports its end."""

        def work() -> None:
            summary = None
            try:
                summary = self.run_one(t)
            except Exception as exc:  # a bug; run_trajectory recorded it in summary.json when it got that far
                self.errors[t.id] = f"{type(exc).__name__}: {exc}"
            try:
                if self.on_done is not None:
                    self.on_done(t, summary)
            finally:
                self._done.put(t.id)

        threading.Thread(target=work, name=f"trajectory-{t.id}", daemon=True).start()

    def collect(self, timeout_s: float) -> list[str]:
        """Ids of launched trajectories that ended, waiting up to ``timeout_s`` (s) for the first."""
        try:
            ended = [self._done.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while True:
            try:
                ended.append(self._done.get_nowait())
            except queue.Empty:
                return ended

    def _next(self, pending: list[PlannedTrajectory], running: dict[str, str]) -> PlannedTrajectory | None:
        """The first pending trajectory whose model has a free slot."""
        for t in pending:
            limit = self._specs[t.model].concurrency
            if limit is None or sum(1 for m in running.values() if m == t.model) < limit:
                return t
        return None


def service_lanes(url: str, token: str | None) -> tuple[int, dict[str, Any]]:
    """Healthy lanes of the FIBServe at ``url`` and its ``/health`` answer (as JSON).

    Raises:
        EvaluationInfrastructureError: the service does not answer.
    """
    from fibserve.client import FIBServeClient, FIBServeError

    from ..environment import EvaluationInfrastructureError

    try:
        with FIBServeClient(url, token=token, timeout=30.0) as client:
            health = client.health()
    except FIBServeError as exc:
        raise EvaluationInfrastructureError(f"FIBServe at {url}: {exc}") from exc
    return sum(1 for w in health.workers if w.healthy), health.model_dump(mode="json")


def service_token(embedded: bool) -> str | None:
    """The bearer token for a remote FIBServe (``$FIBSERVE_TOKEN``); none for an embedded one."""
    return None if embedded else (os.environ.get("FIBSERVE_TOKEN") or None)
