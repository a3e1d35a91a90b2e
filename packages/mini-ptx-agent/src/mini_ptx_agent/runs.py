"""Run directories of the kernel agent: layout, plan.json, summary.json, and running or resuming one experiment.

One run directory holds one experiment (``exp_000``) of one definition::

    <run>/plan.json                      what was asked (task, model, prompt tag, limits)
    <run>/summary.json                   what happened (exit status, turns, correct versions, best, target)
    <run>/trajectories/exp_000.json      mini-swe-agent-1.1 trajectory, rewritten after every turn
    <run>/exp_000/kernel.cu|py           the latest kernel
    <run>/exp_000/evaluations/turn_NNN.json  the evaluator's result of each evaluated turn
    <run>/success/exp_000/kernel_vN.cu|py    every correct version (N = turn)
    <run>/logs/fibserve.log              the embedded FIBServe's log (when this run started one)

The summary keeps three facts apart: the runner completed (no infrastructure failure), a kernel was correct,
and the target was achieved (on a GPU). "A kernel was correct" is ``null`` (unknown) when no version passed and
some kernel was built but never executed (CUDA on a service without a GPU lane): see :func:`kernel_correctness`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .task import TaskConfig
from .trajectory import load_trajectory, write_json

EXPERIMENT = "exp_000"
RUN_SCHEMA = "ptxbench.run/1"
"""Schema of ``plan.json`` (unchanged, so older runs can still be resumed)."""
SUMMARY_SCHEMA = "ptxbench.run/2"
"""Schema of ``summary.json``. /2: ``kernel_correct`` may be null (unknown: built, never executed); /1 wrote
false there."""
NOT_EXECUTED = "NOT_EXECUTED"
"""Evaluator status of a kernel that was built and analysed but not run (no GPU lane)."""
DEFAULT_OUTPUT_ROOT = Path("data") / "eval_runs"
"""Default parent of run directories, relative to ``$PTXBENCH_DATA_ROOT`` or the working directory."""

DEFAULT_PROMPT_TAGS = {("cuda", "sm_90a"): "hopper-no-hint", ("triton", "sm_90a"): "triton-hopper",
                       ("cuda", "sm_100a"): "blackwell-no-hint"}  # fmt: skip
"""Prompt tag used when none is given, by (language, arch)."""


class RunLayout:
    """Paths inside one run directory (see the module docstring for the tree)."""

    def __init__(self, root: Path, experiment: str = EXPERIMENT):
        self.root = Path(root)
        self.experiment = experiment

    @property
    def plan_path(self) -> Path:
        """``plan.json``."""
        return self.root / "plan.json"

    @property
    def summary_path(self) -> Path:
        """``summary.json``."""
        return self.root / "summary.json"

    @property
    def trajectory_path(self) -> Path:
        """``trajectories/exp_000.json``."""
        return self.root / "trajectories" / f"{self.experiment}.json"

    @property
    def experiment_dir(self) -> Path:
        """``exp_000/``: the latest kernel and the evaluator results."""
        return self.root / self.experiment

    @property
    def success_dir(self) -> Path:
        """``success/exp_000/``: every correct version."""
        return self.root / "success" / self.experiment

    @property
    def service_log_path(self) -> Path:
        """``logs/fibserve.log``: the embedded FIBServe's log."""
        return self.root / "logs" / "fibserve.log"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RunPlan(_Model):
    """What a run was asked to do (``plan.json``); a resumed run reads it back."""

    schema_version: Literal["ptxbench.run/1"] = RUN_SCHEMA
    run_id: str
    created_at: str
    """UTC, ISO 8601."""
    task: TaskConfig
    model: str
    """Model name as given (``replay:...``, a litellm name, or the served id of an OpenAI-compatible endpoint)."""
    prompt_tag: str
    num_turns: int = Field(ge=1)
    """Model calls before ``LimitsExceeded``."""
    wall_time_limit_s: int = Field(default=0, ge=0)
    """Whole-run limit (s); 0 = none."""
    turn_timeout_s: float = Field(default=900.0, gt=0)
    """Limit on one model call (s); each evaluation's limit is ``min(task.timeout_s, turn_timeout_s)``."""
    service: str
    """``embedded`` or the FIBServe URL used."""


class RunSummary(_Model):
    """What happened (``summary.json``)."""

    schema_version: Literal["ptxbench.run/2"] = SUMMARY_SCHEMA
    run_id: str
    exit_status: str
    """Submitted, LimitsExceeded, TimeExceeded, RepeatedFormatError, InfrastructureError, or an exception name."""
    exit_message: str = ""
    runner_completed: bool
    """The loop ended by its own rules (not by an infrastructure failure or a crash)."""
    kernel_correct: bool | None
    """True: at least one version passed every workload. None (unknown): none passed and at least one kernel was
    built but not executed (``NOT_EXECUTED``: CUDA without a GPU lane). False: none passed otherwise (each
    evaluated kernel failed, or no kernel was evaluated)."""
    target_met: bool
    """A version passed every workload on a GPU at or above the target speedup."""
    turns: int
    """Model calls made."""
    correct_versions: list[int] = Field(default_factory=list)
    """Turns whose kernel passed every workload (``success/exp_000/kernel_v<turn>``)."""
    best: dict[str, Any] | None = None
    """``{turn, min_speedup, executed_on_gpu}`` of the fastest correct version."""
    infrastructure_error: str | None = None
    elapsed_s: float
    trajectory: str = f"trajectories/{EXPERIMENT}.json"
    resumed: bool = False


def utc_stamp() -> str:
    """``20260130T071500Z``: a sortable UTC timestamp for directory names."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def default_output_root() -> Path:
    """``$PTXBENCH_DATA_ROOT/eval_runs`` or ``data/eval_runs`` under the working directory."""
    root = os.environ.get("PTXBENCH_DATA_ROOT")
    return Path(root) / "eval_runs" if root else DEFAULT_OUTPUT_ROOT


def default_prompt_tag(task: TaskConfig) -> str:
    """The prompt tag for the task's language and architecture."""
    return DEFAULT_PROMPT_TAGS.get((task.language, task.arch), "hopper-no-hint")


def kernel_correctness(versions: Sequence[int], statuses: Sequence[str]) -> bool | None:
    """Whether a kernel was correct: True when ``versions`` (correct turns) is not empty, None (unknown) when
    some evaluated kernel has status ``NOT_EXECUTED``, else False. ``statuses``: evaluator status per turn."""
    if versions:
        return True
    return None if NOT_EXECUTED in statuses else False


def evaluation_statuses(layout: RunLayout) -> list[str]:
    """The evaluator status of each evaluated turn (``exp_000/evaluations/turn_NNN.json``), in turn order."""
    statuses = []
    for path in sorted((layout.experiment_dir / "evaluations").glob("turn_*.json")):
        try:
            statuses.append(str(json.loads(path.read_text(encoding="utf-8")).get("status")))
        except (OSError, ValueError, AttributeError):
            continue
    return statuses


def summarize(
    run_id: str,
    result: dict[str, Any],
    trajectory: dict[str, Any],
    *,
    resumed: bool,
    statuses: Sequence[str] = (),
) -> RunSummary:
    """Build the summary from the agent's final message and the saved trajectory's ``info.ptxbench``.

    ``statuses``: the evaluator status of each evaluated turn (:func:`evaluation_statuses`); they decide whether
    "no correct version" means False or unknown (:func:`kernel_correctness`).
    """
    state = trajectory.get("info", {}).get("ptxbench", {})
    last = trajectory["messages"][-1] if trajectory.get("messages") else {}
    status = str(result.get("exit_status") or "")
    infra = status == "InfrastructureError"
    best = state.get("best")
    return RunSummary(
        run_id=run_id,
        exit_status=status,
        exit_message=str(last.get("content", "")) if last.get("role") == "exit" else "",
        runner_completed=status in ("Submitted", "LimitsExceeded", "TimeExceeded", "RepeatedFormatError"),
        kernel_correct=kernel_correctness(list(state.get("versions", [])), statuses),
        target_met=status == "Submitted",
        turns=int(state.get("turns", 0)),
        correct_versions=list(state.get("versions", [])),
        best=best,
        infrastructure_error=str(last.get("content", "")) if infra else None,
        elapsed_s=float(state.get("elapsed_s", 0.0)),
        resumed=resumed,
    )


def load_plan(run_dir: Path) -> RunPlan:
    """Read ``plan.json`` of a run directory.

    Raises:
        FileNotFoundError: not a run directory (no plan.json).
    """
    path = RunLayout(run_dir).plan_path
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory: {path.name} is missing")
    return RunPlan.model_validate(json.loads(path.read_text(encoding="utf-8")))


def new_run_dir(output_root: Path, task: TaskConfig, name: str | None = None) -> Path:
    """Create ``<output_root>/<name or run-<UTC>-<language>-<definition>>`` (a new, empty directory).

    Raises:
        FileExistsError: the directory exists already.
    """
    run_dir = Path(output_root) / (name or f"run-{utc_stamp()}-{task.language}-{task.definition}")
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def run_experiment(
    plan: RunPlan,
    run_dir: Path,
    *,
    backend: Any,
    model: Any,
    resume: bool = False,
) -> RunSummary:
    """Run (or resume) the kernel agent of ``plan`` in ``run_dir`` with an evaluation ``backend`` and ``model``.

    Writes plan.json, the trajectory after every turn, kernels, evaluator results and summary.json.
    Infrastructure failures end the run with exit status ``InfrastructureError`` (recorded, not raised).

    Raises:
        ValueError: ``resume`` on a run that already met its target.
        TrajectoryError: ``resume`` and the saved trajectory is unreadable.
    """
    from .agent import EvaluationEnvironment, ExperimentFiles, KernelAgent, literal_template
    from .evaluation import EvaluationInfrastructureError
    from .prompts import compose_system_prompt, first_user_message

    layout = RunLayout(run_dir)
    task = plan.task.model_copy(update={"timeout_s": min(plan.task.timeout_s, plan.turn_timeout_s)})
    write_json(layout.plan_path, plan.model_dump(mode="json"))
    saved = load_trajectory(layout.trajectory_path) if resume else None
    started = time.time()
    files = ExperimentFiles(
        layout.experiment_dir, layout.success_dir, layout.trajectory_path, Path(task.entry_file).suffix
    )
    try:
        definition = backend.definition(task.definition)
        workloads = backend.workloads(task.definition)
    except EvaluationInfrastructureError as exc:
        summary = RunSummary(
            run_id=plan.run_id, exit_status="InfrastructureError", exit_message=str(exc), runner_completed=False,
            kernel_correct=False, target_met=False, turns=0, infrastructure_error=str(exc),
            elapsed_s=round(time.time() - started, 3), resumed=resume,
        )  # fmt: skip
        write_json(layout.summary_path, summary.model_dump(mode="json"))
        return summary
    if task.workload_uuids is not None:
        wanted = set(task.workload_uuids)
        workloads = [w for w in workloads if w.uuid in wanted]
    agent = KernelAgent(
        model,
        EvaluationEnvironment(backend, task),
        files=files,
        task=task,
        system_template=literal_template(compose_system_prompt(plan.prompt_tag)),
        instance_template=literal_template(
            first_user_message(
                definition.model_dump(mode="json"),
                language=task.language,
                target_speedup=task.target_speedup,
                workloads=workloads,
            )
        ),
        step_limit=plan.num_turns,
        wall_time_limit_seconds=plan.wall_time_limit_s,
        turn_timeout_s=plan.turn_timeout_s,
        solution_prefix=f"{plan.run_id}",
        author=plan.model,
        output_path=layout.trajectory_path,
    )
    if saved is not None:
        agent.resume(saved)
    try:
        result = agent.run()
    except Exception:
        # A bug, not a verdict: DefaultAgent recorded it as the exit message; keep a summary, then re-raise.
        trajectory = agent.save(layout.trajectory_path)
        summary = summarize(
            plan.run_id,
            trajectory["messages"][-1].get("extra", {}),
            trajectory,
            resumed=resume,
            statuses=evaluation_statuses(layout),
        )
        write_json(layout.summary_path, summary.model_dump(mode="json"))
        raise
    trajectory = agent.save(layout.trajectory_path)
    summary = summarize(plan.run_id, result, trajectory, resumed=resume, statuses=evaluation_statuses(layout))
    write_json(layout.summary_path, summary.model_dump(mode="json"))
    return summary


def _infrastructure_summary(run_id: str, message: str, started: float, resumed: bool) -> RunSummary:
    return RunSummary(
        run_id=run_id,
        exit_status="InfrastructureError",
        exit_message=message,
        runner_completed=False,
        kernel_correct=False,
        target_met=False,
        turns=0,
        infrastructure_error=message,
        elapsed_s=round(time.time() - started, 3),
        resumed=resumed,
    )


def run_agent(
    *,
    task: TaskConfig | None = None,
    model_name: str | None = None,
    num_turns: int = 3,
    output_root: Path | None = None,
    service_url: str | None = None,
    resume_dir: Path | None = None,
    prompt_tag: str | None = None,
    wall_time_limit_s: int | None = None,
    turn_timeout_s: float = 900.0,
    run_name: str | None = None,
    model_host: str | None = None,
    model: Any = None,
    fallback_replay: Path | None = None,
    devices: list[str] | None = None,
) -> tuple[Path, RunSummary]:
    """Run the kernel agent on one task into a new run directory, or resume ``resume_dir``.

    The model is ``model_name`` (else ``$MODEL_NAME``; see :func:`mini_ptx_agent.models.make_model`), the service
    ``service_url`` (else ``$SERVICE_URL``, else an embedded FIBServe logging to ``logs/fibserve.log``). A resumed
    run takes task, model and limits from its ``plan.json``; a larger ``num_turns`` extends it, and a given
    ``wall_time_limit_s`` (s, 0 = none; None keeps the plan's) replaces its limit (time already spent counts).
    Returns the run directory and its summary (also in ``summary.json``).

    ``model``: an already built model (skips the factory); ``fallback_replay``: trajectory the factory replays
    when no model is configured at all (the quickstart's bundled demo); ``devices``: lanes of an embedded
    FIBServe (default: every GPU, else cpu).

    Raises:
        ValueError: neither ``task`` nor ``resume_dir``; resuming a run that already met its target; no model
            configured or the endpoint serves another id (the message says what to set).
        FileNotFoundError: ``resume_dir`` is not a run directory.
    """
    from .evaluation import EvaluationInfrastructureError, FIBServeBackend
    from .models import ModelConfigError, ModelUnavailableError, make_model
    from .service import ServiceStartError
    from .service import service_url as resolve_service

    started = time.time()
    if resume_dir is not None:
        run_dir: Path | None = Path(resume_dir)
        plan = load_plan(run_dir)
        if num_turns > plan.num_turns:
            plan = plan.model_copy(update={"num_turns": num_turns})
        if wall_time_limit_s is not None:
            plan = plan.model_copy(update={"wall_time_limit_s": wall_time_limit_s})
    elif task is not None:
        run_dir = None
        plan = RunPlan(
            run_id=run_name or f"run-{utc_stamp()}-{task.language}-{task.definition}",
            created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            task=task,
            model=model_name or os.environ.get("MODEL_NAME") or "",
            prompt_tag=prompt_tag or default_prompt_tag(task),
            num_turns=num_turns,
            wall_time_limit_s=wall_time_limit_s or 0,
            turn_timeout_s=turn_timeout_s,
            service=service_url or os.environ.get("SERVICE_URL") or "embedded",
        )
    else:
        raise ValueError("give a task (a new run) or resume_dir (continue a run)")
    resumed = resume_dir is not None
    failure: str | None = None
    try:  # the model first: a configuration mistake must not leave an empty run directory behind
        if model is None:
            model = make_model(plan.model or None, model_host=model_host, fallback_replay=fallback_replay)
        if not plan.model:  # record the model the factory chose (e.g. the bundled demo replay)
            plan = plan.model_copy(update={"model": str(getattr(model.config, "model_name", "unknown"))})
    except ModelConfigError as exc:
        raise ValueError(str(exc)) from None
    except ModelUnavailableError as exc:
        failure = f"model API unavailable: {exc}"
    if run_dir is None:
        run_dir = new_run_dir(output_root or default_output_root(), plan.task, plan.run_id)
    layout = RunLayout(run_dir)
    if failure is None:
        try:
            embedded_options = {"devices": devices} if devices else {}
            service = resolve_service(service_url, log_path=layout.service_log_path, **embedded_options)
            with service as (url, embedded):
                token = None if embedded else (os.environ.get("FIBSERVE_TOKEN") or None)
                backend = FIBServeBackend(url, token=token)
                return run_dir, run_experiment(plan, run_dir, backend=backend, model=model, resume=resumed)
        except (ServiceStartError, EvaluationInfrastructureError) as exc:
            failure = f"evaluation service unavailable: {exc}"
    summary = _infrastructure_summary(plan.run_id, failure, started, resumed)
    write_json(layout.plan_path, plan.model_dump(mode="json"))
    write_json(layout.summary_path, summary.model_dump(mode="json"))
    return run_dir, summary
