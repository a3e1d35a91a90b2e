"""Statistics over timed calls (trusted side): percentiles, latency summaries and pair speedups.

Percentiles are linear-interpolated (the same definition as ``numpy.percentile``'s default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fibserve.trace import LatencySummary


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, linear interpolation; NaN when empty."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> LatencySummary:
    """Median, p10, p90, mean, min, max and count of ``samples`` (ms)."""
    # Imported here, not at the top: only the trusted side summarizes, and the trace data model (pydantic)
    # would add about 0.4 s to every sandbox worker's start.
    from fibserve.trace import LatencySummary

    values = sorted(samples)
    if not values:
        nan = math.nan
        return LatencySummary(median=nan, p10=nan, p90=nan, mean=nan, min=nan, max=nan, count=0)
    return LatencySummary(
        median=percentile(values, 50),
        p10=percentile(values, 10),
        p90=percentile(values, 90),
        mean=sum(values) / len(values),
        min=values[0],
        max=values[-1],
        count=len(values),
    )


def pair_speedup(candidate_ms: Sequence[float], reference_ms: Sequence[float]) -> float:
    """Median over pairs of ``reference_ms[i] / candidate_ms[i]`` (pairs with a non-positive candidate time
    are skipped; NaN when none is left)."""
    ratios = sorted(r / c for c, r in zip(candidate_ms, reference_ms, strict=True) if c > 0)
    return percentile(ratios, 50)
