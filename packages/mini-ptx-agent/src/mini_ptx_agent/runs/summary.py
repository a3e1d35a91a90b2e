"""``summary.json``: what happened in a run, derived from the agent's final message and the saved trajectory.

The summary keeps three facts apart: the runner completed (no infrastructure failure), a kernel was correct,
and the target was achieved (on a GPU). "A kernel was correct" is ``null`` (unknown) when no version passed and
some kernel was built but never executed (CUDA on a service without a GPU lane), or when no kernel was evaluated
because the run stopped on an infrastructure failure (an outage is never counted against a model): see
:func:`kernel_correctness`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..environment.report import NotEvaluated
from .directory import TRAJECTORIES_DIR, TRAJECTORY_ID, TRAJECTORY_SUFFIX, RunLayout, RunPlan, read_evaluation

SUMMARY_SCHEMA = "ptxbench.run/3"
"""Schema of ``summary.json``. /3: ``kernel_correct`` is also null when no kernel was evaluated and the runner did
not complete (an outage; /2 wrote false there). /2: ``kernel_correct`` may be null (unknown: built, never
executed); /1 wrote false there."""


class RunSummary(BaseModel):
    """What happened (``summary.json``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal["ptxbench.run/3"] = SUMMARY_SCHEMA
    run_id: str
    exit_status: str
    """Submitted, LimitsExceeded, TimeExceeded, RepeatedFormatError, InfrastructureError, or an exception name."""
    exit_message: str = ""
    runner_completed: bool
    """The loop ended by its own rules (not by an infrastructure failure or a crash)."""
    kernel_correct: bool | None
    """True: at least one version passed every workload. None (unknown): none passed and at least one kernel was
    built but not executed (``NOT_EXECUTED``: CUDA without a GPU lane), or no kernel was evaluated and the runner
    did not complete (service or model API down). False: none passed otherwise (each evaluated kernel failed, or
    the runner completed without a kernel, e.g. only format errors)."""
    target_met: bool
    """A version passed every workload on a GPU at or above the target speedup."""
    turns: int
    """Model calls made."""
    num_turns: int | None = None
    """The run's turn limit when it ended (None: a summary written before this was recorded). ``LimitsExceeded``
    with fewer ``turns`` is a replay that ran out of recorded replies: the run ended by its rule all the same;
    an experiment extended past ``num_turns`` continues it."""
    correct_versions: list[int] = Field(default_factory=list)
    """Turns whose kernel passed every workload (``success/exp_000/kernel_v<turn>``)."""
    best: dict[str, Any] | None = None
    """``{turn, min_speedup, executed_on_gpu}`` of the fastest correct version."""
    infrastructure_error: str | None = None
    elapsed_s: float
    trajectory: str = f"{TRAJECTORIES_DIR}/{TRAJECTORY_ID}{TRAJECTORY_SUFFIX}"
    resumed: bool = False
    demo: bool = False
    """A demo replay, not a model's output (as ``plan.json`` and the trajectory's ``info.ptxbench.demo`` say):
    never count it as a model's result, never use it as training data."""


def kernel_correctness(
    versions: Sequence[int], statuses: Sequence[str], *, runner_completed: bool
) -> bool | None:
    """Whether a kernel was correct: True when ``versions`` (correct turns) is not empty; None (unknown) when some
    evaluated kernel has status ``NOT_EXECUTED``, or when no kernel was evaluated and the runner did not complete
    (an outage says nothing about the model); else False. ``statuses``: evaluator status per evaluated turn."""
    if versions:
        return True
    if NotEvaluated.NOT_EXECUTED in statuses or (not statuses and not runner_completed):
        return None
    return False


def evaluation_statuses(layout: RunLayout) -> list[str]:
    """The evaluator status of each evaluated turn (``exp_000/evaluations/turn_NNN.json``), in turn order."""
    reports = (read_evaluation(path) for path in layout.evaluation_paths())
    return [report.status.value for report in reports if report is not None]


def summarize(
    run_id: str,
    result: dict[str, Any],
    trajectory: dict[str, Any],
    *,
    resumed: bool,
    statuses: Sequence[str] = (),
    num_turns: int | None = None,
    trajectory_file: str | None = None,
) -> RunSummary:
    """Build the summary from the agent's final message and the saved trajectory's ``info.ptxbench``.

    ``statuses``: the evaluator status of each evaluated turn (:func:`evaluation_statuses`); they decide whether
    "no correct version" means False or unknown (:func:`kernel_correctness`). ``demo`` comes from the
    trajectory's ``info.ptxbench.demo``. ``num_turns``: the run's turn limit; ``trajectory_file``: the
    trajectory's path relative to the run directory (default: the current name).
    """
    state = trajectory.get("info", {}).get("ptxbench", {})
    last = trajectory["messages"][-1] if trajectory.get("messages") else {}
    status = str(result.get("exit_status") or "")
    infra = status == "InfrastructureError"
    best = state.get("best")
    completed = status in ("Submitted", "LimitsExceeded", "TimeExceeded", "RepeatedFormatError")
    return RunSummary(
        run_id=run_id,
        exit_status=status,
        exit_message=str(last.get("content", "")) if last.get("role") == "exit" else "",
        runner_completed=completed,
        kernel_correct=kernel_correctness(
            list(state.get("versions", [])), statuses, runner_completed=completed
        ),
        target_met=status == "Submitted",
        turns=int(state.get("turns", 0)),
        num_turns=num_turns,
        correct_versions=list(state.get("versions", [])),
        best=best,
        infrastructure_error=str(last.get("content", "")) if infra else None,
        elapsed_s=float(state.get("elapsed_s", 0.0)),
        resumed=resumed,
        demo=state.get("demo") is True,
        **({"trajectory": trajectory_file} if trajectory_file else {}),
    )


def failed_summary(
    plan: RunPlan, status: str, message: str, started: float, *, resumed: bool = False
) -> RunSummary:
    """The summary of a run of ``plan`` that ended before its first turn: ``status`` ``InfrastructureError``
    (the service or the model API was down) or ``Refused``; ``started`` is ``time.time()`` at its start. Nothing
    was evaluated, so ``kernel_correct`` is None (unknown)."""
    return RunSummary(
        run_id=plan.run_id, exit_status=status, exit_message=message, runner_completed=False, kernel_correct=None,
        target_met=False, turns=0, num_turns=plan.num_turns,
        infrastructure_error=message if status == "InfrastructureError" else None,
        elapsed_s=round(time.time() - started, 3), resumed=resumed, demo=plan.demo,
    )  # fmt: skip


def read_summary(run_dir: Path) -> RunSummary | None:
    """The run's ``summary.json``, or None when absent or unreadable (a run killed mid-write, or still running)."""
    path = RunLayout(run_dir).summary_path
    try:
        return RunSummary.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
