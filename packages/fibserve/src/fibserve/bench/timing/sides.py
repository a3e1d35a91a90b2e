"""The sides a candidate is timed against, and what their timings say (trusted side, no processes here).

Two roles: the **baseline** (the definition's baseline Solution, vendor quality; timed
next to every candidate call; ``speedup_factor`` is against it) and the **reference** (the definition's
``run``, the correctness oracle). Without a baseline the reference takes the baseline's place: timed on every
call, the speedup is against it, and the result says that no baseline exists. With one, the reference is
timed too, for the speedup against it, but only as often as ``reference_timing_budget_s`` allows
(:func:`reference_plan`): the fp32 attention reference at seq_len 16384 takes about a second a call, so
timing it next to all 150 candidate calls would cost minutes per workload. The first side is the
*primary* one: the timing checks (unexplained round trip, hidden work, L2 overwrite) compare the candidate
with it, as they compared it with the reference before baselines existed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import torch

from fibserve.bench.config import EvalConfig
from fibserve.bench.correctness.compare import compare_outputs
from fibserve.bench.failures import CandidateFailure, ReferenceTimingError
from fibserve.bench.timing import checks
from fibserve.bench.timing import statistics as stats
from fibserve.trace import EvaluationStatus

if TYPE_CHECKING:
    from fibserve.bench.worker.slots import Slots, WorkerTimes


@dataclass
class Side:
    """One comparator in its twin worker, and the calls timed on it during one ``measure``."""

    role: Literal["baseline", "reference"]
    solution: str
    """The Solution the twin runs (``<definition>__reference`` for the reference)."""
    slots: Slots
    """The twin's buffers, laid out like the candidate's."""
    description: str = ""
    every: int = 1
    """Timed next to candidate calls whose running index is a multiple of this (1: every call)."""
    warmup_calls: int | None = None
    """Untimed calls before trial 0 (then none in later trials); None: ``config.warmup`` in every trial."""
    check: bool = False
    """Compare its first call's outputs in every trial with the reference (the baseline)."""
    calls: list[WorkerTimes] = field(default_factory=list)
    paired: list[int] = field(default_factory=list)
    """Index of the candidate call each of ``calls`` was timed next to."""
    after_candidate: list[bool] = field(default_factory=list)
    """For each of ``calls``: whether the timed call right before it was the candidate's
    (:mod:`fibserve.bench.timing.neighbour_bias`)."""

    def due(self, index: int) -> bool:
        """Whether this side is timed next to candidate call number ``index`` (counted over all trials)."""
        return index % self.every == 0

    def warmup(self, trial: int, config: EvalConfig) -> int:
        """Untimed calls before trial ``trial``."""
        if self.warmup_calls is None:
            return config.warmup
        return self.warmup_calls if trial == 0 else 0


@contextlib.contextmanager
def harness_fault(side: Side) -> Iterator[None]:
    """Turn a failure on a comparator's timing worker (dead worker, error reply, timeout) into a
    ReferenceTimingError: the candidate is never blamed for it."""
    try:
        yield
    except CandidateFailure as failure:
        raise ReferenceTimingError(
            f"the {side.role} {side.solution!r} could not be timed in its worker ({failure.status.value}): "
            f"{failure.log[-2000:]}"
        ) from None


def check_side(
    side: Side,
    slot: int,
    expected: Mapping[str, torch.Tensor],
    dtypes: Mapping[str, torch.dtype],
    input_set: int,
    config: EvalConfig,
) -> None:
    """The side's outputs in ``slot`` must match the reference outputs ``expected`` like a candidate's.

    Raises:
        ReferenceTimingError: they do not (a harness problem, never the candidate's).
    """
    side.slots.require_alive()
    result = compare_outputs(
        {n: t.clone() for n, t in side.slots.outputs[slot].items()},
        expected,
        dtypes,
        atol=config.atol,
        rtol=config.rtol,
        required_matched_ratio=config.required_matched_ratio,
        chunk=config.compare_chunk_elements,
    )
    if result.status is not EvaluationStatus.PASSED:
        raise ReferenceTimingError(
            f"the {side.role} {side.solution!r} disagrees with the definition's reference on input set "
            f"{input_set} ({result.status.value}: {result.message}): a wrong {side.role} or tolerances that "
            "vendor kernels cannot meet; the candidate was not judged by it"
        )


@dataclass(frozen=True)
class ReferencePlan:
    """Whether and how often the reference is timed next to a candidate that has a baseline."""

    every: int | None
    """Timed next to every ``every``-th candidate call; None: not timed."""
    reason: str | None = None
    """Why it is sampled or not timed (for the result)."""


def reference_plan(config: EvalConfig, call_ms: float | None) -> ReferencePlan:
    """How often to time the reference within ``config.reference_timing_budget_s`` per workload, given one
    call's wall time ``call_ms`` measured in the correctness phase (None: unknown, e.g. cached outputs).

    One untimed warmup call plus ``n`` timed ones must fit the budget; ``n`` is capped at one per candidate
    call; fewer than one per trial means not timed at all.
    """
    if not config.time_reference:
        return ReferencePlan(None, "time_reference is false in the evaluation config")
    total = config.trials * config.iterations
    if call_ms is None or call_ms <= 0:
        return ReferencePlan(1)
    budget_ms = config.reference_timing_budget_s * 1e3
    timed = int(budget_ms // call_ms) - 1
    if timed >= total:
        return ReferencePlan(1)
    if timed < config.trials:
        return ReferencePlan(
            None,
            f"one reference call takes about {call_ms:.0f} ms: {config.trials + 1} calls exceed the "
            f"{config.reference_timing_budget_s:g} s reference timing budget (reference_timing_budget_s)",
        )
    every = math.ceil(total / timed)
    return ReferencePlan(
        every,
        f"sampled: timed next to every {every}th candidate call, so that its calls (about {call_ms:.0f} ms "
        f"each) fit the {config.reference_timing_budget_s:g} s reference timing budget",
    )


def side_times(side: Side, basis: str) -> list[float]:
    """The side's timed call times (ms) by ``basis``: ``events``, the device-synchronized ``bound``, or
    ``device`` (CUPTI spans held to the bound, :func:`fibserve.bench.timing.checks.comparator_device_times`;
    every call must have one)."""
    if basis == "device":
        calls = side.calls
        spans = [c.device[0] if c.device else 0.0 for c in calls]
        return checks.comparator_device_times([c.bound[0] for c in calls], spans)
    return [c.ms[0] if basis == "events" else c.bound[0] for c in side.calls]


def speedup_stats(side: Side, candidate_ms: list[float], basis: str) -> dict[str, Any]:
    """Median latency of ``side`` and the median, p10 and p90 of ``side_ms / candidate_ms`` over its pairs."""
    mine = side_times(side, basis)
    paired = [candidate_ms[i] for i in side.paired]
    ratios = sorted(r / c for c, r in zip(paired, mine, strict=True) if c > 0)
    return {
        "latency_ms": stats.summarize(mine).median if mine else None,
        "speedup": stats.percentile(ratios, 50) if ratios else None,
        "speedup_p10": stats.percentile(ratios, 10) if ratios else None,
        "speedup_p90": stats.percentile(ratios, 90) if ratios else None,
        "pairs": len(ratios),
    }


def comparison_extras(
    sides: list[Side], candidate_ms: list[float], basis: str, plan: ReferencePlan | None, definition: str
) -> dict[str, Any]:
    """The labelled comparisons for ``performance.extra`` (read back by :class:`fibserve.trace.Comparisons`):
    ``speedup_basis``, ``baseline``, ``vs_reference`` and ``no_baseline``."""
    baseline = next((s for s in sides if s.role == "baseline"), None)
    reference = next((s for s in sides if s.role == "reference"), None)
    extras: dict[str, Any] = {"speedup_basis": sides[0].role, "baseline": None, "no_baseline": None}
    if baseline is not None:
        stats = speedup_stats(baseline, candidate_ms, basis)
        extras["baseline"] = {"solution": baseline.solution, "description": baseline.description, **stats}
    else:
        extras["no_baseline"] = (
            f"{definition!r} names no baseline Solution (no 'baseline:' tag): speedup_factor is against its "
            "reference, a PyTorch correctness oracle, not a vendor-quality kernel"
        )
    if reference is None:
        why = plan.reason if plan is not None else "not timed"
        extras["vs_reference"] = {"timed": False, "reason": why}
    else:
        stats = speedup_stats(reference, candidate_ms, basis)
        reason = plan.reason if plan is not None and reference is not sides[0] else None
        extras["vs_reference"] = {
            "timed": True,
            "latency_ms": stats["latency_ms"],
            "speedup": stats["speedup"],
            "pairs": stats["pairs"],
            "every": reference.every,
            "reason": reason,
        }
    return extras
