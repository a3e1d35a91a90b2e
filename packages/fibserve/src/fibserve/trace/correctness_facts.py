"""Everything FIBServe says about how a result was judged, read from ``correctness.extra`` with types.

FlashInfer Trace's :class:`~fibserve.trace.Correctness` carries the two largest errors and a free ``extra``
object; FIBServe's evaluator writes its correctness facts there under fixed keys (the tolerances used, per
output statistics and which checks decided each output, the workload's degenerate outputs, the roofline
plausibility verdict of a timed result). :meth:`CorrectnessFacts.of` reads them back typed, so a reader asks
``facts.plausibility.flagged`` instead of indexing ``extra`` by string. Every field is optional: a failing
result carries fewer of them, and older results may lack any. The keys are the ones FIBServe has always
written (``fibserve.bench.correctness.check``, ``fibserve.bench.session``); this model only reads them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .comparisons import Roofline
from .evaluation import Correctness

DegenerateKind = Literal["constant", "near_constant"]
"""``near_constant``: a constant could pass the elementwise check, so the output was also held to the relative
norm check; ``constant``: no comparison can tell a kernel that writes the constant from a correct one
(``fibserve.bench.data.degenerate``)."""


class _Fact(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True, ser_json_inf_nan="strings")


class OutputFacts(_Fact):
    """How one output compared with the reference."""

    max_absolute_error: float | None = None
    max_relative_error: float | None = None
    matched_ratio: float | None = None
    """Elements within ``atol + rtol * |reference|`` over all elements."""
    nan_count: int | None = None
    relative_l2_error: float | None = None
    decided_by: Literal["shape", "dtype", "elementwise", "elementwise+relative_norm"] | None = None
    """The checks that decided the output (``elementwise+relative_norm`` for a near-constant output)."""


class Plausibility(_Fact):
    """The roofline verdict on a timed latency (``fibserve.bench.timing.roofline.check_plausibility`` makes it;
    only ``flagged`` is required, so a verdict of an older result missing the other facts still reads)."""

    flagged: bool
    """The latency is below ``floor_ms``: faster than physics allows on this device (implausible)."""
    device_model: str | None = None
    """The peak table entry, e.g. ``H200``."""
    dtype_family: str | None = None
    """Which of the device's compute peaks applies (``bf16``, ``fp8``, ``fp32`` ...)."""
    flops: float | None = None
    """Floating-point operations of the workload."""
    bytes: float | None = None
    """Bytes the workload must move at least (every input and output once)."""
    floor_ms: float | None = None
    """The fastest time the device's peaks allow for the workload's FLOPs and bytes (ms)."""
    latency_ms: float | None = None
    """The candidate's median latency (ms)."""
    achieved_tflops: float | None = None
    achieved_tb_s: float | None = None
    roofline_fraction: float | None = None
    """``floor_ms / latency_ms`` (1.0 at the roofline)."""
    bound: Literal["compute", "memory"] | None = None
    """Which peak sets the floor."""
    peak_tflops: float | None = None
    peak_tb_s: float | None = None
    peak_source: str | None = None
    """Where the peaks come from (NVIDIA's datasheets)."""

    def roofline(self) -> Roofline:
        """The ``performance.extra.roofline`` entry of this verdict.

        Raises:
            pydantic.ValidationError: the verdict lacks a fact the entry needs (an older, partial verdict).
        """
        return Roofline.model_validate(
            {**self.model_dump(exclude={"flagged", "roofline_fraction"}), "fraction": self.roofline_fraction}
        )


class CorrectnessFacts(_Fact):
    """The correctness facts of one workload's evaluation (``correctness.extra``)."""

    matched_ratio: float | None = None
    """The smallest matched ratio over outputs."""
    atol: float | None = None
    rtol: float | None = None
    required_matched_ratio: float | None = None
    outputs: dict[str, OutputFacts] = Field(default_factory=dict)
    """Output name -> how it compared (outputs with numerical statistics only)."""
    degenerate: dict[str, DegenerateKind] = Field(default_factory=dict)
    """Output name -> its kind, for outputs the elementwise check alone cannot judge; others are absent."""
    outputs_untouched: list[str] = Field(default_factory=list)
    """Outputs still holding the poison written before the call (the kernel wrote nothing there)."""
    input_sets: int | None = None
    """Distinct input sets the correctness check ran."""
    timed_outputs_validated: int | None = None
    """Timed outputs compared in full with the reference."""
    plausibility: Plausibility | None = None
    """The roofline verdict (timed results on a known device only)."""

    @classmethod
    def of(cls, correctness: Correctness | None) -> CorrectnessFacts:
        """The facts stored in ``correctness.extra`` (empty when there is none; unknown keys are ignored).

        Raises:
            pydantic.ValidationError: a known key holds a value of the wrong type.
        """
        extra = (correctness.extra or {}) if correctness is not None else {}
        return cls.model_validate(extra)

    @property
    def constant_outputs(self) -> list[str]:
        """Outputs no comparison can judge (kind ``constant``), sorted."""
        return sorted(name for name, kind in self.degenerate.items() if kind == "constant")
