"""One row per turn: the per-turn table that experiments write and reports and data pipelines read.

:class:`TurnRow` is the row of ``turns.csv`` / ``turns.parquet`` (schema ``ptxbench.turns/1``). A turn is one
model call and what became of its reply: a format error (no kernel block), or a kernel and its evaluation.
:func:`failure_class` maps the evaluator's status to the coarse classes a report counts, and
:func:`turn_rows` derives the rows of one trajectory from its run directory (docs/run-directory.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fibserve.trace import EvaluationStatus
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..environment.report import KernelReport, NotEvaluated
from ..trajectory import load_trajectory
from .directory import RunLayout, load_plan

TURNS_SCHEMA = "ptxbench.turns/1"

FailureClass = Literal[
    "PASSED",
    "format",
    "policy",
    "compile",
    "runtime",
    "incorrect",
    "timeout",
    "not_executed",
    "infrastructure",
]
"""What a turn came to: ``PASSED`` (every workload), or why not. ``format``: the reply held no kernel block;
``policy``: the source policy refused the kernel; ``compile``: it did not build; ``runtime``: it crashed, raised,
or the sanitizer gate found an error; ``incorrect``: wrong shape, dtype or values; ``timeout``: over the time
limit; ``not_executed``: built but not run (CUDA without a GPU lane: correctness unknown); ``infrastructure``:
the model endpoint or the service failed (says nothing about the kernel)."""

_CLASS_OF_STATUS: dict[str, FailureClass] = {
    EvaluationStatus.PASSED: "PASSED",
    EvaluationStatus.INCORRECT_SHAPE: "incorrect",
    EvaluationStatus.INCORRECT_NUMERICAL: "incorrect",
    EvaluationStatus.INCORRECT_DTYPE: "incorrect",
    EvaluationStatus.RUNTIME_ERROR: "runtime",
    EvaluationStatus.COMPILE_ERROR: "compile",
    EvaluationStatus.TIMEOUT: "timeout",
    NotEvaluated.NOT_EXECUTED: "not_executed",
    NotEvaluated.SANITIZER_FAILED: "runtime",
    NotEvaluated.INFRASTRUCTURE_ERROR: "infrastructure",
}


def failure_class(status: str, *, policy_violations: bool = False) -> FailureClass:
    """The :data:`FailureClass` of an evaluated kernel's overall status (``KernelReport.status``).

    A COMPILE_ERROR with source-policy findings is ``policy`` (the service refuses such kernels before building).

    Raises:
        ValueError: ``status`` is not an ``EvaluationStatus`` or ``NotEvaluated`` value.
    """
    if status not in _CLASS_OF_STATUS:
        raise ValueError(f"unknown evaluation status {status!r}; expected one of {sorted(_CLASS_OF_STATUS)}")
    if status == EvaluationStatus.COMPILE_ERROR and policy_violations:
        return "policy"
    return _CLASS_OF_STATUS[status]


class TurnRow(BaseModel):
    """One turn of one trajectory (a row of ``turns.csv`` / ``turns.parquet``).

    Speedups are comparator latency / kernel latency (x), against the definition's baseline Solution when it
    has one (``speedup_basis``), else against its reference; they are set only for PASSED workloads.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal["ptxbench.turns/1"] = TURNS_SCHEMA
    experiment: str
    """The experiment's name (a single run or quickstart: its run directory's name)."""
    trajectory: str
    """The trajectory's stable id within the experiment (``plan.json``)."""
    model: str
    definition: str
    language: str
    """``cuda`` or ``triton``."""
    arch: str
    """Target architecture, e.g. ``sm_90a``."""
    prompt_tag: str
    replica: int = Field(ge=0)
    turn: int = Field(ge=1)
    """1-based model call number within the trajectory."""
    failure_class: FailureClass
    status: str
    """The evaluator's overall status (``FORMAT_ERROR`` for a reply without a kernel)."""
    executed_on_gpu: bool = False
    """Every workload was timed on a GPU (speedups mean nothing otherwise)."""
    target_speedup: float
    target_met: bool = False
    speedups: dict[str, float | None] = Field(default_factory=dict)
    """Workload uuid -> speedup (x), None where that workload did not pass."""
    min_speedup: float | None = None
    """Minimum of ``speedups`` over workloads (x), set only when every workload PASSED."""
    speedup_basis: Literal["baseline", "reference"] | None = None
    latency_ms: float | None = None
    """The kernel's median latency (ms) on the workload that gave ``min_speedup``."""
    ptx_families: list[str] = Field(default_factory=list)
    """Instruction families found in the PTX, e.g. ``wgmma``, ``cp.async.bulk.tensor``."""
    sass_families: list[str] = Field(default_factory=list)
    """Instruction families found in the SASS, e.g. ``HGMMA``, ``UTMALDG``."""
    executed_families: list[str] | None = None
    """SASS families Nsight Compute saw execute (None: not profiled)."""
    tokens_in: int | None = None
    """Prompt tokens of this model call (None: the endpoint did not say)."""
    tokens_out: int | None = None
    """Completion tokens, reasoning included."""
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    """This call's cost in USD (None: the model has no known price)."""
    seconds: float | None = None
    """Wall time of the turn: the model call plus the evaluation (s)."""
    demo: bool = False
    """From a demo replay: never a model's result, never training data."""


FORMAT_ERROR = "FORMAT_ERROR"
"""The ``status`` of a turn whose reply held no kernel block."""


def turn_rows(
    run_dir: Path, *, experiment: str | None = None, trajectory: str | None = None, replica: int = 0
) -> list[TurnRow]:
    """The rows of one trajectory's run directory, one per turn, in turn order.

    Reads ``plan.json`` (task, model, prompt tag, demo), ``trajectories/exp_000.traj.json`` (each assistant message's
    ``extra.usage``, ``cost_usd``, ``latency_s`` and ``timestamp``; each user message's ``extra.ptxbench``
    ``{kind, turn}``) and the KernelReport of each evaluated turn (``exp_000/evaluations/turn_NNN.json``, else
    the copy in the feedback message's ``extra.ptxbench.report``). A turn is a reply followed by its feedback
    (evaluation or format error); a last reply whose evaluation ended the run with ``InfrastructureError`` is a
    row of class ``infrastructure`` (a resumed run asks that turn again and rewrites the trajectory, so it is
    never counted twice). A run stopped before its first reply has no rows.

    ``experiment`` defaults to the run directory's name, ``trajectory`` to the plan's ``run_id``.
    ``seconds`` is the model call's latency plus the time from the reply to its feedback (None when the model
    did not report its latency, e.g. a replay).

    Raises:
        FileNotFoundError: not a run directory (no ``plan.json``).
        TrajectoryError: the trajectory file exists but cannot be read.
        ValueError: a KernelReport file does not validate.
    """
    layout = RunLayout(run_dir)
    plan = load_plan(layout.root)
    if not layout.trajectory_path.is_file():
        return []
    messages = load_trajectory(layout.trajectory_path).get("messages", [])
    task = plan.task
    common = {
        "experiment": experiment or layout.root.name, "trajectory": trajectory or plan.run_id, "model": plan.model,
        "definition": task.definition, "language": task.language, "arch": task.arch, "prompt_tag": plan.prompt_tag,
        "replica": replica, "target_speedup": task.target_speedup, "demo": plan.demo,
    }  # fmt: skip
    rows: list[TurnRow] = []
    for answered in answered_turns(messages):
        if answered.kind == "evaluation":
            outcome = _evaluated(turn_report(layout, answered))
        elif answered.kind == "format_error":
            outcome = {"failure_class": "format", "status": FORMAT_ERROR}
        else:
            outcome = {"failure_class": "infrastructure", "status": NotEvaluated.INFRASTRUCTURE_ERROR.value}
        rows.append(
            TurnRow(**common, turn=answered.turn, **outcome, **_usage(answered.reply, answered.following))
        )
    return rows


@dataclass(frozen=True)
class AnsweredTurn:
    """One model call of a trajectory and the message that answered its reply."""

    turn: int
    """1-based model call number."""
    reply: dict[str, Any]
    """The assistant message."""
    following: dict[str, Any]
    """The feedback (user) message, or the exit message of a run that ended on an infrastructure failure."""
    kind: Literal["evaluation", "format_error", "infrastructure"]
    """An evaluated kernel, a reply without a kernel block, or an evaluation the service failed."""


def answered_turns(messages: list[dict[str, Any]]) -> Iterator[AnsweredTurn]:
    """The answered model calls of a trajectory's ``messages``, in turn order (see :func:`turn_rows`): a reply
    followed by its feedback (``extra.ptxbench.kind`` ``evaluation`` or ``format_error``) or by the exit
    message of an ``InfrastructureError``. A reply without either (the run stopped during its evaluation) is
    counted as a turn but not yielded: a resumed run asks it again."""
    turn = 0
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        turn += 1
        following = messages[index + 1] if index + 1 < len(messages) else {}
        kind = ((following.get("extra") or {}).get("ptxbench") or {}).get("kind")
        if following.get("role") == "user" and kind in ("evaluation", "format_error"):
            yield AnsweredTurn(turn, message, following, kind)
        elif following.get("role") == "exit" and (following.get("extra") or {}).get("exit_status") == (
            "InfrastructureError"
        ):
            yield AnsweredTurn(turn, message, following, "infrastructure")


def turn_report(layout: RunLayout, answered: AnsweredTurn) -> KernelReport:
    """The KernelReport of an evaluated turn: ``exp_000/evaluations/turn_NNN.json``, else the copy in its
    feedback message's ``extra.ptxbench.report``.

    Raises:
        ValueError: the report does not validate.
    """
    path = layout.evaluation_path(answered.turn)
    state = (answered.following.get("extra") or {}).get("ptxbench") or {}
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else state.get("report")
        return KernelReport.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise ValueError(
            f"the KernelReport of turn {answered.turn} ({path}) does not validate: {exc}"
        ) from None


def _evaluated(report: KernelReport) -> dict[str, Any]:
    analysis = report.static_analysis
    speedups = {
        w.workload_uuid: w.speedup if w.status == EvaluationStatus.PASSED else None for w in report.workloads
    }
    timed = [w for w in report.workloads if w.status == EvaluationStatus.PASSED and w.speedup is not None]
    slowest = min(timed, key=lambda w: w.speedup or 0.0) if timed and report.all_passed else None
    bases = [w.speedup_basis for w in report.workloads if w.speedup_basis is not None]
    return {
        "failure_class": failure_class(
            report.status.value, policy_violations=bool(analysis and analysis.policy_violations)
        ),
        "status": report.status.value,
        "executed_on_gpu": report.executed_on_gpu,
        "target_met": report.target_met,
        "speedups": speedups,
        "min_speedup": report.min_speedup if report.all_passed else None,
        "speedup_basis": bases[0] if bases else None,
        "latency_ms": slowest.latency_ms if slowest else None,
        "ptx_families": list(analysis.ptx_families) if analysis else [],
        "sass_families": list(analysis.sass_families) if analysis else [],
        "executed_families": report.ncu.sass_families if report.ncu and not report.ncu.error else None,
    }


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _usage(reply: dict[str, Any], following: dict[str, Any]) -> dict[str, Any]:
    extra = reply.get("extra") or {}
    usage = extra.get("usage") or {}
    details = usage.get("completion_tokens_details") or {}
    cost = extra.get("cost_usd")
    latency = extra.get("latency_s")
    seconds = None
    if isinstance(latency, int | float):
        replied, answered = extra.get("timestamp"), (following.get("extra") or {}).get("timestamp")
        evaluating = (
            answered - replied
            if isinstance(replied, int | float) and isinstance(answered, int | float)
            else 0
        )
        seconds = round(float(latency) + max(0.0, evaluating), 3)
    return {
        "tokens_in": _int_or_none(usage.get("prompt_tokens")),
        "tokens_out": _int_or_none(usage.get("completion_tokens")),
        "reasoning_tokens": _int_or_none(usage.get("reasoning_tokens", details.get("reasoning_tokens"))),
        "cost_usd": float(cost) if isinstance(cost, int | float) else None,
        "seconds": seconds,
    }
