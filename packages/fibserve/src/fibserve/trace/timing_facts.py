"""Everything FIBServe says about how a result was timed, read from and written to ``performance.extra``.

FlashInfer Trace's :class:`~fibserve.trace.Performance` carries three numbers and a free ``extra`` object;
FIBServe writes its timing facts there under fixed keys, through :class:`TimingFacts` (the service builds one
and stores :meth:`TimingFacts.to_extra`), and readers get them back typed with :meth:`TimingFacts.of` (the
agent, the CLI tables), so nobody indexes ``extra`` by string. The JSON keys are the ones FIBServe has always
written; a FlashInfer tool that knows none of them still reads the three numbers.

The comparisons (``speedup_basis``, ``baseline``, ``vs_reference``, ``roofline``, ``no_baseline``) are the
fields of :class:`~fibserve.trace.Comparisons`, which this model extends. Every field is optional: an untimed
result (``timed: false``, CPU mode) carries four of them, and older results may lack any.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .comparisons import Comparisons
from .evaluation import Performance


class _Fact(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True, ser_json_inf_nan="strings")


class LatencySummary(_Fact):
    """Statistics of one side's timed calls (ms; linear-interpolated percentiles)."""

    median: float
    p10: float
    p90: float
    mean: float
    min: float
    max: float
    count: int
    """Timed calls behind the statistics."""


class L2Overwrite(_Fact):
    """The cold-L2 overwrite before each timed call, next to the candidate and next to the primary side."""

    passes: int
    """Passes over the overwrite buffer before each call."""
    solo_ms: float
    """One overwrite alone, measured when the evaluator started (ms)."""
    candidate_ms: float
    """Median overwrite time before the candidate's calls (ms)."""
    reference_ms: float
    """Median overwrite time before the primary side's calls (ms)."""
    excess_ms: float
    """``candidate_ms - reference_ms`` (ms)."""
    flagged: bool
    """The excess is large enough to suggest work on another stream ran before the start event."""
    gate: bool = False
    """Each pass was the gate kernel that holds every SM until the overwrite ends (``fibserve.bench.worker.l2_state``)."""
    release: bool = False
    """The gate's last pass was to hold every SM until the host had queued the whole timed call, so that no
    host launch time is in either side's latency (``fibserve.bench.worker.clock.time_call``)."""
    candidate_released: bool | None = None
    """False when some of the candidate's timed calls were not queued behind the release (they wait on the GPU
    from the host, e.g. ``.item()`` or a synchronize, or take longer than 0.25 ms to queue): those calls'
    latency includes host time beyond the overwrite."""
    reference_released: bool | None = None
    """The same for the primary side's calls."""


class PersistingL2(_Fact):
    """What was done about persisting-L2 lines before the timed calls (``fibserve.bench.worker.l2_state``)."""

    reset_before_each_timed_call: bool
    """The carve-out was set to 0 and persisting lines reset before every timed call, on both sides."""
    candidate_max_bytes: int
    """The largest persisting-L2 carve-out the candidate's calls left set (bytes; 0 when it set none)."""


class NeighbourBias(_Fact):
    """How much the primary side's time depends on the candidate timed right before it
    (``fibserve.bench.timing.neighbour_bias``)."""

    after_candidate_ms: float
    """Median of the primary side's calls that came right after a candidate call (ms)."""
    after_itself_ms: float
    """Median of its calls that came right after one of its own (ms)."""
    ratio: float
    """``after_candidate_ms / after_itself_ms``."""
    speedup_after_itself: float
    """The speedup from the pairs whose primary call came after its own alone (the neighbour cannot have
    inflated it)."""
    pairs_after_itself: int
    flagged: bool
    """``ratio`` exceeds 1.05: the result carries a note."""
    after_itself_p90_ms: float | None = None
    """The p90 of the calls after its own (ms): their spread."""
    applied: bool = False
    """The median after the candidate lay beyond that spread: ``speedup_factor`` and ``reference_latency_ms``
    were re-timed from the calls after its own alone."""


class TimingFacts(Comparisons):
    """The timing facts of one workload's Performance (``performance.extra``)."""

    measured_on: Literal["gpu", "cpu"] | None = None
    """Where the times come from; ``cpu`` results are never a GPU speedup."""
    timed: bool | None = None
    """``false`` when nothing was timed (CPU mode); absent on timed results."""
    reason: str | None = None
    """Why nothing was timed."""
    cpu_call_wall_ms: float | None = None
    """Wall time of one untimed correctness call on CPU (ms)."""
    method: str | None = None
    """How the speedup was measured, in words."""
    timing_basis: str | None = None
    """``events`` (CUDA events), ``device`` (each call's CUPTI span: the candidate's held to its events,
    :func:`fibserve.bench.timing.checks.device_times`, a comparator's to its bound,
    :func:`fibserve.bench.timing.checks.comparator_device_times`), or ``device-synchronized`` (the bound, when
    work outlived the end event)."""
    events_over_span_ms: dict[str, float | None] | None = None
    """On the ``device`` basis: the median CUDA-event time less the CUPTI span of the primary comparator's calls
    and of the candidate's (ms, ``{"reference", "candidate"}``; the candidate's null when some call had no
    span): what the events add. The candidate's calls count from their event time less the reference's figure
    (:func:`fibserve.bench.timing.checks.device_times`)."""
    hidden_work_ms: float | None = None
    """How long the candidate's work outlived its end event (ms)."""
    unexplained_round_trip_ms: float | None = None
    """Round trip of the candidate's calls not explained by their timed work, beyond the primary side's (ms)."""
    l2_overwrite: L2Overwrite | None = None
    candidate_ms: LatencySummary | None = None
    reference_ms: LatencySummary | None = None
    """The primary side's statistics (the baseline when the definition has one)."""
    speedup_p10: float | None = None
    speedup_p90: float | None = None
    pairs: int | None = None
    """Timed pairs behind ``speedup_factor``."""
    candidate_wall_ms_median: float | None = None
    """Median round trip of one candidate call request as the trusted process saw it (ms)."""
    warmup: int | None = None
    iterations: int | None = None
    trials: int | None = None
    input_sets: int | None = None
    slots: int | None = None
    """Buffer slots per side that the timed calls rotated over, each its own allocations (a latency is a median
    over that many placements in device memory; ``timing_slots`` of the evaluation config)."""
    cold_l2: bool | None = None
    l2_flush_bytes: int | None = None
    """Bytes overwritten before each call for a cold L2 (0 when ``cold_l2`` is off)."""
    timed_outputs_validated: int | None = None
    """Timed outputs compared in full with the reference."""
    timed_outputs_checked_for_poison: int | None = None
    """Timed calls whose outputs were checked for leftover poison right after the reply."""
    comparator_overwrite_ungated: bool | None = None
    """A comparator's worker ran the cold-L2 overwrite without its gate kernel."""
    persisting_l2: PersistingL2 | None = None
    comparators_timed_with_candidate_paused: bool | None = None
    """The candidate's sandbox was stopped during every comparator call (``fibserve.bench.timing.guard``)."""
    busy_probe_ms: LatencySummary | None = None
    """The trusted process's device probe before each comparator call (ms; idle is a few microseconds)."""
    idle_wait_ms: LatencySummary | None = None
    """How long each comparator call waited for the device to become idle, the candidate paused (ms;
    ``fibserve.bench.timing.guard``): what the candidate left running after its calls."""
    neighbour_bias: NeighbourBias | None = None
    device_start: dict[str, Any] | None = None
    """Clocks, power and temperature before timing (``fibserve.bench.device.DeviceSnapshot``)."""
    device_end: dict[str, Any] | None = None
    """The same after timing."""

    @classmethod
    def of(cls, performance: Performance | None) -> TimingFacts:
        """The facts stored in ``performance.extra`` (empty when there is none; unknown keys are ignored).

        Raises:
            pydantic.ValidationError: a known key holds a value of the wrong type.
        """
        extra: dict[str, Any] = (performance.extra or {}) if performance is not None else {}
        return cls.model_validate(extra)

    def to_extra(self) -> dict[str, Any]:
        """The ``performance.extra`` object: the keys that were set (explicit nulls included), nothing else."""
        return self.model_dump(exclude_unset=True)
