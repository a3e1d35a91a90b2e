"""Evaluation: the outcome of running one solution on one workload (status, errors, timing, environment).

JSON-compatible with FlashInfer Trace evaluations. Non-finite floats are written as the JSON strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (pydantic ``ser_json_inf_nan="strings"``, as FlashInfer-Bench
writes them) and read back from those strings. A model that holds these (a task answer, a report) must set
``ser_json_inf_nan="strings"`` too: pydantic writes nested floats by the outermost model's setting, whose default
turns NaN into ``null``, which these float fields then refuse.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, field_validator, model_validator

from ._base import NonEmptyStr, TraceModel


class EvaluationStatus(StrEnum):
    """Outcome of one evaluation; one vocabulary end to end (never inferred from log text)."""

    PASSED = "PASSED"
    """Correct on every check; correctness and performance are present."""
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    """An output had the wrong shape."""
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    """Outputs differ from the reference beyond tolerance; correctness is present."""
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    """An output had the wrong dtype."""
    RUNTIME_ERROR = "RUNTIME_ERROR"
    """The candidate raised, crashed or hit a CUDA error while running."""
    COMPILE_ERROR = "COMPILE_ERROR"
    """The candidate failed to build."""
    TIMEOUT = "TIMEOUT"
    """The candidate did not finish within the time limit."""


class Correctness(TraceModel):
    """Error measurements of the candidate's outputs against the reference (over all outputs)."""

    max_relative_error: float = 0.0
    """Largest ``|x - y| / |y|`` over all elements (non-negative, or NaN when undefined)."""
    max_absolute_error: float = 0.0
    """Largest ``|x - y|`` over all elements (non-negative, or NaN when an output has NaN)."""
    extra: dict[str, Any] | None = None
    """Further metrics, e.g. ``matched_ratio``, ``atol``, ``rtol`` used."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"extra"})

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative_or_nan(cls, value: float) -> float:
        if not math.isnan(value) and value < 0:
            raise ValueError(f"error must be non-negative or NaN, got {value}")
        return value


NonNegativeFloat = Annotated[float, Field(ge=0.0)]


class Performance(TraceModel):
    """Timing of the candidate and the reference on the same device.

    A value that was not measured is null (absent), never 0: a PASSED run without a GPU (CPU mode) has all
    three null, with ``extra.timed: false`` and the reason, so averaging speedups cannot count it as 0x.
    Public FlashInfer Trace files always carry numbers, and load unchanged.
    """

    latency_ms: NonNegativeFloat | None = None
    """Candidate latency in milliseconds (median); null when not measured."""
    reference_latency_ms: NonNegativeFloat | None = None
    """Reference latency in milliseconds (median); null when not measured."""
    speedup_factor: NonNegativeFloat | None = None
    """``reference_latency_ms / latency_ms`` (or the median of per-pair ratios when interleaved); null when
    not measured."""
    extra: dict[str, Any] | None = None
    """Further timing facts: spread (p10/p90), counts, clocks, whether measured on a GPU."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"extra"})


class Environment(TraceModel):
    """Where an evaluation ran."""

    hardware: NonEmptyStr
    """Device name, e.g. ``NVIDIA H200`` (``cpu`` when run on the Triton interpreter)."""
    libs: dict[str, str] = Field(default_factory=dict)
    """Library name to version string, e.g. ``{"torch": "2.11.0", "cuda": "13.0"}``."""


class Evaluation(TraceModel):
    """Result of evaluating one solution on one workload.

    Status and fields must agree: PASSED has correctness and performance; INCORRECT_NUMERICAL has
    correctness and no performance; every other status has neither.
    """

    status: EvaluationStatus
    """The outcome."""
    environment: Environment
    """Hardware and library versions."""
    timestamp: NonEmptyStr
    """When it ran, ISO 8601."""
    log: str = ""
    """Captured output and error text (compile log, traceback)."""
    correctness: Correctness | None = None
    """Error measurements (PASSED and INCORRECT_NUMERICAL only)."""
    performance: Performance | None = None
    """Timing (PASSED only)."""

    @model_validator(mode="after")
    def _status_matches_fields(self) -> Evaluation:
        status = self.status
        needs_correctness = status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
        needs_performance = status is EvaluationStatus.PASSED
        if needs_correctness and self.correctness is None:
            raise ValueError(f"status {status.value} requires correctness")
        if not needs_correctness and self.correctness is not None:
            raise ValueError(f"status {status.value} must not carry correctness")
        if needs_performance and self.performance is None:
            raise ValueError(f"status {status.value} requires performance")
        if not needs_performance and self.performance is not None:
            raise ValueError(f"status {status.value} must not carry performance")
        return self
