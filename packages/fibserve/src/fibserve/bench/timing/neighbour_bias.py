"""How much a comparator's time depends on the candidate timed next to it (trusted side, no processes): the
bound reported with every GPU result.

Seen on the H200: torch.matmul at M=232 took 0.0336 ms timed beside the reference kernels and 0.066-0.147 ms
beside a 35 ms naive GEMM (docs/gpu-results.md, third session); the cause (a context switch after a long
call, clocks after a long kernel, TLB state) is not known. Whatever it is, the interleaving already holds
the measurement it needs: pairs alternate their order, so half of a comparator's timed calls come right after
a candidate call and the other half right after one of its own (``c t | t c | c t | ...``). If the candidate
slows what runs after it, the first half is slower. :func:`neighbour_bias` compares the two medians and
gives the speedup from the second half alone, the one the neighbour cannot have inflated. When the comparator's
median after the candidate lies beyond its own spread after itself (above that half's p90, and more than
``NOTE_FRACTION`` above its median), the result is re-timed from the second half: its ``speedup_factor`` and
``reference_latency_ms`` are those of the calls after itself (``applied``), and it carries a note. Both halves
are in ``performance.extra.neighbour_bias``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fibserve.bench.timing import statistics as stats

NOTE_FRACTION = 0.05
"""Relative slowdown of a comparator after candidate calls above which the result gets a note."""


def neighbour_bias(
    side_ms: Sequence[float], after_candidate: Sequence[bool], paired_candidate_ms: Sequence[float]
) -> dict[str, Any] | None:
    """The neighbour effect on one comparator.

    Args:
        side_ms: the comparator's timed calls (ms), in time order.
        after_candidate: for each, whether the call right before it was a candidate call.
        paired_candidate_ms: the candidate call each was paired with (ms).

    Returns:
        ``after_candidate_ms`` and ``after_itself_ms`` (medians), ``ratio`` (the first over the second),
        ``after_itself_p90_ms``, ``speedup_after_itself`` (median of comparator / candidate over the pairs where
        the comparator came after itself), ``flagged`` (ratio above ``1 + NOTE_FRACTION``) and ``applied``
        (flagged, and the median after the candidate beyond the p90 after itself: the result is re-timed from
        the calls after itself); None when either half is empty.
    """
    after = [ms for ms, flag in zip(side_ms, after_candidate, strict=True) if flag]
    itself = [
        (ms, c) for ms, flag, c in zip(side_ms, after_candidate, paired_candidate_ms, strict=True) if not flag
    ]
    if not after or not itself:
        return None
    after_ms = stats.percentile(sorted(after), 50)
    itself_sorted = sorted(ms for ms, _ in itself)
    itself_ms = stats.percentile(itself_sorted, 50)
    itself_p90 = stats.percentile(itself_sorted, 90)
    ratio = after_ms / itself_ms if itself_ms > 0 else float("nan")
    flagged = ratio > 1 + NOTE_FRACTION
    return {
        "after_candidate_ms": after_ms,
        "after_itself_ms": itself_ms,
        "after_itself_p90_ms": itself_p90,
        "ratio": ratio,
        "speedup_after_itself": stats.pair_speedup([c for _, c in itself], [ms for ms, _ in itself]),
        "pairs_after_itself": len(itself),
        "flagged": flagged,
        "applied": flagged and after_ms > itself_p90,
    }
