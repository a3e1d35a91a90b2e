"""`ptxbench experiment run`: a new experiment from a config, or `--resume DIR` (with `--extend-turns N`).

:func:`run_experiment` checks everything that can be checked (the config's definitions, tags and workloads
against the catalog, every model once) before it creates the directory, writes ``plan.json``, starts or reaches
the service, writes the manifest, runs the trajectories (:class:`~.runner.ExperimentRunner`, or with ``--ray``
:class:`~.ray_runner.RayExperimentRunner`) with live progress, and at the end (also after Ctrl-C) writes the
per-turn table and the manifest again.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import Any

from ..trajectory import write_json
from .config import ExperimentConfig, ExperimentConfigError, config_hash
from .directory import ExperimentLayout, load_experiment, trajectory_state
from .manifest import build_manifest, write_manifest
from .plan import ExperimentPlan, LocalCatalog, ServiceCatalog, expand
from .runner import (
    ExperimentResult,
    ExperimentRunner,
    ModelChecks,
    check_models,
    service_lanes,
    service_token,
)
from .table import experiment_rows, write_turns


def default_experiments_root() -> Path:
    """Where experiment directories go without ``--output``: ``experiments/`` beside the run directories'
    default root (``$PTXBENCH_DATA_ROOT/experiments``, ...)."""
    from ..runs.directory import default_output_root

    return default_output_root().parent / "experiments"


def plan_experiment(config: ExperimentConfig, *, service_url: str | None = None) -> ExperimentPlan:
    """The expansion of ``config`` against the service's catalog (``service_url``) or the local trace sets.

    Raises:
        ExperimentConfigError: see :func:`~.plan.expand`.
    """
    catalog = ServiceCatalog(service_url, service_token(False)) if service_url else LocalCatalog()
    return expand(config, catalog)


def _resumed(resume_dir: Path, config: ExperimentConfig | None, extend_turns: int) -> ExperimentPlan:
    try:
        plan = load_experiment(resume_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise ExperimentConfigError(f"--resume {resume_dir}: {exc}") from None
    if config is not None and config_hash(config) != plan.config_hash:
        raise ExperimentConfigError(
            f"--resume {resume_dir}: this experiment was made with another config ({plan.config_hash}); "
            "leave CONFIG out to continue it, or start a new experiment"
        )
    if extend_turns:
        plan = plan.model_copy(update={"num_turns": plan.num_turns + extend_turns})
    return plan


def run_experiment(
    config: ExperimentConfig | None = None,
    *,
    resume_dir: Path | None = None,
    output: Path | None = None,
    extend_turns: int = 0,
    service_url: str | None = None,
    model_host: str | None = None,
    ray_address: str | None = None,
    console: Any = None,
) -> ExperimentResult:
    """Run ``config`` into a new directory ``output`` (default under :func:`default_experiments_root`), or
    continue ``resume_dir`` (``extend_turns`` more turns for every trajectory; finished ``LimitsExceeded`` ones
    continue from their saved context).

    The service is ``service_url`` (its token ``$FIBSERVE_TOKEN``), else an embedded FIBServe logging to
    ``logs/fibserve.log``. ``ray_address`` ('auto' or the head's host:port): run the trajectories as Ray tasks
    on that cluster (:mod:`.ray_runner`); None: threads of this process, and Ray is not imported.
    ``console``: a rich Console for progress (None: quiet). The first Ctrl-C stops starting trajectories and
    ends the running ones at their next model call; a second one leaves at once.

    Raises:
        ExperimentConfigError: no config nor resume directory; the config does not expand; ``output`` exists and
            is not empty; ``resume_dir`` is not an experiment or was made with another config; ``extend_turns``
            without ``resume_dir``.
        ModelConfigError: a model is misconfigured.
        EvaluationInfrastructureError, ServiceStartError: the service does not answer or has no healthy lane
            (the directory stays, and ``--resume`` continues it).
        RayExperimentError: no Ray cluster at ``ray_address`` (before any file), or a node cannot see the
            directory or reach the service (the directory stays).
    """
    from rich.console import Console

    from ..environment.embedded import service_url as resolve_service

    console = console or Console(quiet=True)
    if resume_dir is not None:
        plan, root = _resumed(Path(resume_dir), config, extend_turns), Path(resume_dir)
    elif config is None:
        raise ExperimentConfigError("give a CONFIG (a new experiment) or --resume DIR (continue one)")
    elif extend_turns:
        raise ExperimentConfigError("--extend-turns continues an experiment: give it with --resume DIR")
    else:
        plan = plan_experiment(config, service_url=service_url)
        root = Path(output) if output is not None else default_experiments_root() / plan.name
        if root.exists() and any(root.iterdir()):
            raise ExperimentConfigError(f"--output {root}: exists and is not empty; give a new directory")
        plan = plan.model_copy(update={"name": root.name})
    layout = ExperimentLayout(root)
    with contextlib.ExitStack() as stack:
        if ray_address is not None:
            from . import ray_runner

            ray_runner.connect(ray_address)  # before any file, and before the slower model checks
            stack.callback(ray_runner.disconnect)
        checked = check_models(plan, model_host)  # before any file
        root.mkdir(parents=True, exist_ok=True)
        write_json(layout.plan_path, plan.model_dump(mode="json"))
        url, embedded = stack.enter_context(resolve_service(service_url, log_path=layout.service_log_path))
        return _run(plan, root, url, embedded, checked, model_host, ray_address, console)


def _run(
    plan: ExperimentPlan, root: Path, url: str, embedded: bool, checked: ModelChecks, model_host: str | None,
    ray_address: str | None, console: Any,
) -> ExperimentResult:  # fmt: skip
    """The experiment ``plan`` in ``root`` against the service at ``url``, once everything is in place."""
    from .progress import ExperimentProgress

    layout = ExperimentLayout(root)
    token = service_token(embedded)
    lanes, health = service_lanes(url, token)
    if lanes == 0:
        from ..environment import EvaluationInfrastructureError

        raise EvaluationInfrastructureError(f"FIBServe at {url} has no healthy lane: {health.get('workers')}")
    todo_before = [
        t for t in plan.trajectories if trajectory_state(layout.run_dir(t.id), plan.num_turns) != "finished"
    ]
    progress = ExperimentProgress(
        console, trajectories=len(plan.trajectories), done_before=len(plan.trajectories) - len(todo_before),
        turns_to_run=len(todo_before) * plan.num_turns,
    )  # fmt: skip
    options = dict(
        url=url, token=token, lanes=lanes, checked=checked, model_host=model_host, on_turn=progress.on_turn,
        on_done=progress.on_done,
    )  # fmt: skip
    service: dict[str, Any] = {"url": "embedded" if embedded else url, "lanes": lanes, "health": health}
    if ray_address is None:
        runner = ExperimentRunner(plan, root, **options)
    else:
        from .ray_runner import RayExperimentRunner, check_nodes

        service["ray"] = {"address": ray_address, "nodes": check_nodes(root, url)}
        runner = RayExperimentRunner(plan, root, embedded=embedded, **options)
    service["devices"] = runner.devices

    def record() -> None:
        rows = experiment_rows(plan, root)
        write_turns(rows, root)
        write_manifest(build_manifest(plan, root, service=service, models=checked.records, rows=rows), root)

    write_manifest(build_manifest(plan, root, service=service, models=checked.records, rows=[]), root)
    result = ExperimentResult(root=root, trajectories=len(plan.trajectories))
    with progress, _interrupts(runner, console):
        try:
            result.ran = runner.run()
        finally:
            record()
    result.interrupted = runner.stopping
    result.errors = dict(runner.errors)
    states = {t.id: trajectory_state(layout.run_dir(t.id), plan.num_turns) for t in plan.trajectories}
    result.finished = sum(1 for s in states.values() if s == "finished")
    result.unfinished = [tid for tid, s in states.items() if s != "finished"]
    return result


class _interrupts:
    """Within it, the first SIGINT asks ``runner`` to stop; the second raises KeyboardInterrupt (main thread
    only; elsewhere nothing is installed)."""

    def __init__(self, runner: ExperimentRunner, console: Any):
        self.runner = runner
        self.console = console
        self._previous: Any = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.runner.stopping:
            raise KeyboardInterrupt
        self.runner.stop()
        # Printed by a thread of its own: the handler runs between two bytecodes of the main thread, which may
        # be inside rich's printing or an import it makes (the Ray runner prints progress on the main thread);
        # printing from here re-entered that import ("partially initialized module rich._emoji_codes").
        threading.Thread(
            target=self.console.print,
            args=(
                "stopping: no new trajectories; running ones end at their next model call "
                "(Ctrl-C again to leave now; --resume continues either way)",
            ),
            kwargs={"highlight": False},
            name="ptxbench-stopping-notice",
            daemon=True,
        ).start()

    def __enter__(self) -> _interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
