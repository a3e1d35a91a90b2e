"""The evaluated turns of experiment and run directories: what the mining steps choose from.

A source is an experiment directory (``plan.json`` of ``ptxbench.experiment/1``; its trajectories are the run
directories ``runs/<id>/`` its plan lists) or one trajectory's run directory (``plan.json`` of
``ptxbench.run/1``: ``ptxbench run``, the quickstart). Each evaluated turn (a reply with a kernel and the
evaluator's KernelReport; docs/run-directory.md) becomes an :class:`EvaluatedTurn`: its provenance, the
report, the kernel, the conversation's system prompt and task message, and the deterministic feedback text of
the report (the error log a repair model and a Fixit row show). Turns without a kernel (format errors) and
turns the service failed to evaluate are not evaluated turns.

Demo replays are skipped whole, never read: a trajectory whose run ``plan.json`` or ``summary.json`` says
``demo: true``, or whose trajectory's ``info.ptxbench.demo`` is true (docs/run-directory.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..environment.report import KernelReport
from ..experiments.directory import ExperimentLayout, load_experiment
from ..extraction import extract_kernel
from ..feedback import format_feedback
from ..runs.directory import RUN_SCHEMA, RunLayout, RunPlan, load_plan, plan_schema
from ..runs.summary import read_summary
from ..runs.turns import answered_turns, failure_class, turn_report
from ..trajectory import TrajectoryError, load_trajectory
from .records import DataStepError, Provenance


@dataclass(frozen=True)
class EvaluatedTurn:
    """One turn whose kernel was evaluated, with everything a training record needs of it."""

    provenance: Provenance
    report: KernelReport
    kernel: str
    """The kernel source the turn sent (the reply's last block of the task's language)."""
    system: str
    """The system prompt the agent saw."""
    task_message: str
    """The first user message (the task, with the definition JSON)."""
    feedback: str
    """The report as deterministic feedback text (:func:`mini_ptx_agent.feedback.format_feedback`)."""
    plan: RunPlan
    """The trajectory's ``plan.json`` (task, feedback options)."""


@dataclass
class Scan:
    """What :func:`scan_sources` found."""

    turns: list[EvaluatedTurn] = field(default_factory=list)
    trajectories: int = 0
    """Trajectory run directories read (demo replays included)."""
    demo_trajectories: int = 0
    """Demo replays skipped."""


class _TrajectoryState(BaseModel):
    """The part of a trajectory's ``info.ptxbench`` read here."""

    model_config = ConfigDict(extra="ignore")

    demo: bool = False


@dataclass(frozen=True)
class _Trajectory:
    source: Path
    run_dir: Path
    experiment: str
    config_hash: str | None
    trajectory: str | None
    replica: int


def _trajectories(source: Path) -> list[_Trajectory]:
    try:
        schema = plan_schema(source)
    except (OSError, ValueError):
        raise DataStepError(
            f"{source} is neither an experiment directory nor a run directory (no readable plan.json)"
        ) from None
    if schema == RUN_SCHEMA:
        return [_Trajectory(source, source, source.name, None, None, 0)]
    try:
        plan = load_experiment(source)
    except (FileNotFoundError, ValueError) as exc:
        raise DataStepError(f"{source}: {exc}") from None
    layout = ExperimentLayout(source)
    return [
        _Trajectory(source, layout.run_dir(t.id), plan.name, plan.config_hash, t.id, t.replica)
        for t in plan.trajectories
        if RunLayout(layout.run_dir(t.id)).plan_path.is_file()
    ]


def _is_demo(plan: RunPlan, run_dir: Path, trajectory: dict) -> bool:
    summary = read_summary(run_dir)
    state = _TrajectoryState.model_validate((trajectory.get("info") or {}).get("ptxbench") or {})
    return plan.demo or (summary is not None and summary.demo) or state.demo


def _turns(t: _Trajectory, plan: RunPlan, messages: list[dict]) -> Iterator[EvaluatedTurn]:
    layout = RunLayout(t.run_dir)
    if len(messages) < 2 or messages[0].get("role") != "system" or messages[1].get("role") != "user":
        return
    task = plan.task
    for answered in answered_turns(messages):
        if answered.kind != "evaluation":
            continue
        report = turn_report(layout, answered)
        kernel = extract_kernel(answered.reply.get("content") or "", task.language).source
        if kernel is None:
            continue
        analysis = report.static_analysis
        provenance = Provenance(
            source_dir=str(t.source), experiment=t.experiment, config_hash=t.config_hash,
            run_dir=str(t.run_dir.relative_to(t.source)), trajectory=t.trajectory or plan.run_id,
            replica=t.replica, turn=answered.turn, model=plan.model, definition=task.definition,
            language=task.language, arch=task.arch, prompt_tag=plan.prompt_tag,
            kernel_hash=task.solution(kernel, name="kernel").hash(),
            evaluation=str(layout.evaluation_path(answered.turn).relative_to(t.source)),
            status=report.status.value,
            failure_class=failure_class(
                report.status.value, policy_violations=bool(analysis and analysis.policy_violations)
            ),
            executed_on_gpu=report.executed_on_gpu, min_speedup=report.min_speedup,
        )  # fmt: skip
        yield EvaluatedTurn(
            provenance=provenance,
            report=report,
            kernel=kernel,
            system=str(messages[0].get("content") or ""),
            task_message=str(messages[1].get("content") or ""),
            feedback=format_feedback(report, options=plan.feedback, arch=task.arch),
            plan=plan,
        )


def scan_sources(sources: Sequence[Path]) -> Scan:
    """Every evaluated turn of ``sources`` (experiment or run directories), in source, plan and turn order.

    Raises:
        DataStepError: no source given; a source that is not a directory, or neither kind; a trajectory or
            KernelReport file that does not read (the message names it).
    """
    if not sources:
        raise DataStepError("give at least one experiment or run directory")
    scan = Scan()
    for source in sources:
        source = Path(source).resolve()
        if not source.is_dir():
            raise DataStepError(f"{source} is not a directory: give experiment or run directories")
        for t in _trajectories(source):
            layout = RunLayout(t.run_dir)
            if not layout.trajectory_path.is_file():
                continue
            try:
                plan = load_plan(t.run_dir)
                trajectory = load_trajectory(layout.trajectory_path)
                scan.trajectories += 1
                if _is_demo(plan, t.run_dir, trajectory):
                    scan.demo_trajectories += 1
                    continue
                scan.turns += list(_turns(t, plan, trajectory["messages"]))
            except (TrajectoryError, ValidationError, ValueError, FileNotFoundError) as exc:
                raise DataStepError(f"cannot read the trajectory in {t.run_dir}: {exc}") from None
    return scan
