"""What a timed evaluation was compared against, read from ``performance.extra`` with types.

FlashInfer Trace's Performance has three numbers (``latency_ms``, ``reference_latency_ms``,
``speedup_factor``); FIBServe keeps them and their meaning for FlashInfer tools (``speedup_factor`` is
the median per-pair ratio against ``reference_latency_ms``'s side), and says in ``performance.extra`` which
side that is and what else was measured:

* ``speedup_basis``: ``"baseline"`` (the definition's baseline Solution, vendor quality: cuBLAS, cuDNN SDPA;
  targets are judged on it) or ``"reference"`` (no baseline exists: the definition's PyTorch reference,
  which says nothing about kernel quality; ``no_baseline`` explains);
* ``baseline``: the baseline Solution's name, description, median latency and the speedup against it;
* ``vs_reference``: the speedup against the definition's reference, or why it was not timed (over the
  reference timing budget, or switched off);
* ``roofline``: the fraction of the device's roofline the candidate reached (peaks and their source).

:meth:`Comparisons.of` reads them from any Performance (older results without them give ``None`` fields), so
consumers never index ``extra`` by hand.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .evaluation import Performance


class _Extra(BaseModel):
    # extras may gain fields; readers ignore the ones they do not know
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True, ser_json_inf_nan="strings")


class BaselineComparison(_Extra):
    """The candidate against the definition's baseline Solution, timed in interleaved pairs."""

    solution: str
    """Name of the baseline Solution (the definition's ``baseline:`` tag)."""
    description: str = ""
    """What the baseline runs (e.g. cuDNN SDPA), and its caveats (the FP8 baseline runs at bf16 speed)."""
    latency_ms: float | None = None
    """Median latency of the baseline (ms)."""
    speedup: float | None = None
    """Median over pairs of baseline_ms / candidate_ms (x)."""
    speedup_p10: float | None = None
    speedup_p90: float | None = None
    pairs: int = 0
    """Timed pairs behind the speedup."""


class ReferenceComparison(_Extra):
    """The candidate against the definition's reference (the correctness oracle, usually slow PyTorch)."""

    timed: bool
    """Whether the reference was timed at all."""
    latency_ms: float | None = None
    """Median latency of the reference (ms), when timed."""
    speedup: float | None = None
    """Median over pairs of reference_ms / candidate_ms (x), when timed."""
    pairs: int = 0
    """Timed pairs behind the speedup (fewer than the baseline's when the reference is sampled)."""
    every: int | None = None
    """The reference was timed next to every ``every``-th candidate call (1: every one)."""
    reason: str | None = None
    """Why it was not timed, or sampled."""


class Roofline(_Extra):
    """How close the candidate came to the device's roofline (see :mod:`fibserve.bench.timing.roofline`)."""

    device_model: str
    """The peak table entry, e.g. ``H200``."""
    fraction: float
    """``floor_ms / latency_ms``: 1.0 at the roofline."""
    floor_ms: float
    flops: float
    bytes: float
    achieved_tflops: float
    bound: Literal["compute", "memory"]
    """Which peak sets the floor."""
    peak_tflops: float
    peak_tb_s: float
    peak_source: str = ""
    """Where the peaks come from (NVIDIA's datasheets)."""


class Comparisons(_Extra):
    """The labelled comparisons of one timed evaluation (all None for an untimed or older result)."""

    speedup_basis: Literal["baseline", "reference"] | None = None
    """What ``speedup_factor`` and ``reference_latency_ms`` are against."""
    baseline: BaselineComparison | None = None
    vs_reference: ReferenceComparison | None = None
    roofline: Roofline | None = None
    no_baseline: str | None = None
    """Why the speedup is against the reference (the definition names no baseline Solution)."""

    @classmethod
    def of(cls, performance: Performance | None) -> Comparisons:
        """The comparisons stored in ``performance.extra`` (empty when there is none)."""
        extra: dict[str, Any] = (performance.extra or {}) if performance is not None else {}
        return cls.model_validate({k: extra.get(k) for k in cls.model_fields})

    @property
    def basis_label(self) -> str:
        """``baseline <solution>``, ``reference`` or ``unknown``: what the speedup is against, for people."""
        if self.speedup_basis == "baseline" and self.baseline is not None:
            return f"baseline {self.baseline.solution}"
        return self.speedup_basis or "unknown"
