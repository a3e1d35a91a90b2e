"""95% intervals behind every number of a report: Wilson score intervals for rates, bootstrap for speedups.

Sources: E. B. Wilson, "Probable inference, the law of succession, and statistical inference", JASA 22 (1927),
in the form of Agresti & Coull, "Approximate is better than 'exact' for interval estimation of binomial
proportions", The American Statistician 52 (1998); the percentile bootstrap of Efron & Tibshirani, "An
Introduction to the Bootstrap" (1993), chapter 13.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

Z_95 = 1.959963984540054
"""The standard normal's 97.5% quantile: the z of a two-sided 95% interval."""

BOOTSTRAP_RESAMPLES = 2000
"""Resamples per bootstrap interval; with a fixed seed the interval is the same on every run."""


class Estimate(BaseModel):
    """One reported number: a point value, its 95% interval, and the n it stands on.

    ``value``, ``low`` and ``high`` are None when ``n`` is 0 (nothing to estimate from).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float | None
    low: float | None
    high: float | None
    n: int
    """Trajectories behind the number (the denominator of a rate, the sample size of a speedup summary)."""


def wilson(successes: int, n: int, z: float = Z_95) -> Estimate:
    """The rate ``successes / n`` with its Wilson score interval (95% by default).

    Raises:
        ValueError: ``successes`` is negative or above ``n``.
    """
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..n, got {successes} of {n}")
    if n == 0:
        return Estimate(value=None, low=None, high=None, n=0)
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return Estimate(value=p, low=max(0.0, center - half), high=min(1.0, center + half), n=n)


def geometric_mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(mean(log x)) along ``axis``; values must be positive (speedups, x)."""
    return np.exp(np.mean(np.log(values), axis=axis))


def bootstrap(
    values: Sequence[float],
    *statistics: Callable[..., np.ndarray],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[Estimate, ...]:
    """Each of ``statistics`` of ``values`` with its 95% percentile-bootstrap interval, in order.

    Each ``statistic(array, axis=-1)`` must reduce the last axis (``np.median``, :func:`geometric_mean`); it is
    evaluated once on ``values`` and once per resample. The resamples (``resamples`` x ``len(values)`` draws
    with replacement, seeded, so a report is reproducible) are drawn once and shared by every statistic.
    One value gives a zero-width interval.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return tuple(Estimate(value=None, low=None, high=None, n=0) for _ in statistics)
    rng = np.random.default_rng(seed)
    samples = data[rng.integers(0, data.size, size=(resamples, data.size))]
    estimates = []
    for statistic in statistics:
        low, high = np.quantile(statistic(samples, axis=-1), [0.025, 0.975])
        point = float(statistic(data, axis=-1))
        estimates.append(Estimate(value=point, low=float(low), high=float(high), n=int(data.size)))
    return tuple(estimates)
