"""The defences on timed calls (trusted side): each is a named function or constant here, with the cheat it
stops, and :func:`fibserve.bench.timing.loop.measure` applies them.

A worker reports its own times, and candidate code runs inside the candidate's worker, so nothing it
reports is taken on trust alone: reported times must fit in the round trip timed here (checked on every call,
:data:`fibserve.bench.worker.slots.WALL_TOLERANCE` and ``WALL_SLACK_MS``); time spent before the reply but not reported shows up against the
reference's twin, which travels the identical path (:func:`unexplained_round_trip`); work left running after
the reply leaves poisoned outputs (:func:`poison_left`) or wrong ones in a sampled full comparison
(``SAMPLE_DENOMINATOR``); work on another stream outlives the end event (:func:`timing_basis`) or slows the
cold-L2 overwrite that it ran alongside (:func:`overwrite_excess`, a note only).
"""

from __future__ import annotations

import torch

from fibserve.bench.failures import CandidateFailure
from fibserve.bench.timing import statistics as stats
from fibserve.trace import EvaluationStatus

UNEXPLAINED_MS = {"cuda": 0.5, "cpu": 5.0}
"""Least median round trip (ms) per call that the candidate's worker may leave unexplained beyond the
reference's twin before its reported times are refused, by device type. CPU timings are never reported as
speedups and a loaded CPU machine's pipes are noisy, hence the larger CPU allowance."""
UNEXPLAINED_FRACTION = 0.25
"""The same allowance as a fraction of the reference's median time, when that is larger."""


def unexplained_round_trip(
    cand_trip: list[float],
    cand_bound: list[float],
    ref_trip: list[float],
    ref_bound: list[float],
    device: torch.device,
    ref_waited: list[float] | None = None,
) -> float:
    """The median over timed pairs of ``(candidate round trip - its reported time) - (the twin's round trip
    - its reported time - its release wait)``, in ms; raises when it exceeds the allowance.

    Stops: a candidate that reports less than its calls took (writes its own reply line, or patches the
    worker's timer). The round trip ends when the reply arrives, and for two workers built alike it exceeds
    the reported time by the same overhead, so time the candidate's worker spends *before replying* but does
    not report reappears here. Each side's host time to queue its call behind the gate's release (at most
    :data:`fibserve.bench.worker.clock.RELEASE_HOST_MS` on most calls before that side stops using the release) is in its
    round trip too: the twin's, which it reports (``ref_waited``, ms per call) and which can be trusted, is
    taken out of its side, so it gives the candidate no extra room; the candidate's own is left in its side. Pairs are compared within themselves (the two calls are adjacent in time, so
    machine load hits both). The allowance, ``UNEXPLAINED_MS`` for the device type or
    ``UNEXPLAINED_FRACTION`` of the reference's median, catches gross under-reporting, not a few percent:
    40 honest torch.matmul evaluations on the H200 left 0.070 to 0.199 ms (docs/gpu-results.md, third
    session), so 0.5 ms keeps a margin of 2.5x. Work left running after the reply is not seen here
    (see :func:`poison_left`).

    Raises:
        CandidateFailure: RUNTIME_ERROR when the candidate leaves more than the allowance unexplained.
    """
    waited = ref_waited if ref_waited is not None else [0.0] * len(ref_trip)
    pairs = list(zip(cand_trip, cand_bound, ref_trip, ref_bound, waited, strict=True))
    if not pairs:
        return 0.0
    unexplained = stats.percentile(sorted((ct - cb) - (rt - rb - rw) for ct, cb, rt, rb, rw in pairs), 50)
    floor = UNEXPLAINED_MS["cuda" if device.type == "cuda" else "cpu"]
    allowance = max(floor, UNEXPLAINED_FRACTION * stats.percentile(sorted(ref_bound), 50))
    if unexplained > allowance:
        raise CandidateFailure(
            EvaluationStatus.RUNTIME_ERROR,
            f"timing: the candidate's worker reported times that do not account for its calls: a median "
            f"{unexplained:.3f} ms per call more round trip than the reference's identical worker "
            f"(allowed {allowance:.3f} ms); its reported times cannot be trusted",
        )
    return unexplained


SAMPLE_DENOMINATOR = 10
"""About one timed candidate call in this many is compared with the reference in full as soon as it replies
(drawn with ``secrets`` after the reply, so the candidate cannot predict it), besides the last call on every
slot in every trial. Stops: a kernel that is wrong except on the calls it expects to be checked."""

NAN_POISONED = (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)
"""Dtypes that :func:`fibserve.bench.dtypes.poison_` fills with NaN."""


def poison_left(outputs: dict[str, torch.Tensor]) -> list[str]:
    """Floating-point outputs that still hold any NaN poison right after the reply (a correct output holds
    no NaN: NaN never matches). Stops: work that finishes after the worker replied, which no timer sees.
    Integer and bool outputs are left to the full comparisons (their sentinel can be a real value). The
    caller must know that the worker owning ``outputs`` is alive."""
    left = []
    for name, t in outputs.items():
        if t.numel() and t.dtype in NAN_POISONED:
            values = t if t.dtype.itemsize > 1 else t.float()
            if bool(torch.isnan(values).any()):
                left.append(name)
    return left


HIDDEN_WORK_MS = 0.02
"""Smallest extra synchronisation gap (ms) of the candidate over the reference that counts as hidden work."""


DEVICE_FLOOR = 0.2
"""Least fraction of a call's CUDA-event time its span may stand for. The smallest kernel there is, a
one-element add, ran 0.96 us in CUPTI and 3.30 us with events on the H200 (0.29; docs/gpu-results.md, ninth
session)."""

SPAN_TOLERANCE_MS = 0.002
"""How far (ms) a candidate's span may fall below its event time less what the events add to the twin's spans.
What events add differs between two honest workers of the same construction, both sides' spans alike: with
torch.matmul against itself the candidate's events added 0.54 to 0.93 us more than the twin's at M=70, 232 and
972, and -0.10 to +0.13 us at M=2379 and 8192 (44 evaluations on an H100 at 2d28be3); at M=70 on the H200, 3.23
to 3.39 us against 2.46 to 2.62 us (12 evaluations), and 3.20 to 3.42 against 2.46 to 2.62 in the eleventh
session (docs/gpu-results.md, eleventh and twelfth sessions). The cause is not known: neither warm spares, the
busy probe, nor pausing the twins moved it. At 0.5 us this hold lifted the honest candidate by about 0.3 us
and read its speedup as 0.985 to 0.993 at M=70. A candidate that forges its spans alone gains at most this
much a call, or down to ``DEVICE_FLOOR`` of its event time for a kernel whose events are under about 5 us
(a 1.75 us add could then read 2x faster); one that forges its reply's CUDA-event times too is bounded only
by the round-trip check (docs/security.md, "What the timing cannot see")."""


def device_times(ms: list[float], bound: list[float], device: list[float], below: float) -> list[float]:
    """The candidate's latencies (ms) by its CUPTI spans ``device`` (:mod:`fibserve.bench.worker.kernel_span`; 0
    where a call sent none): each span held within ``[max(ms - below, DEVICE_FLOOR x ms), bound]``, where ``ms``
    is the call's CUDA-event time and ``bound`` its upper bound. The candidate's worker runs its code, which may
    forge its spans, so ``below`` is what the events add to the primary comparator's spans
    (:func:`events_over_span`) plus ``SPAN_TOLERANCE_MS``: a candidate that forges low spans gains at most
    ``SPAN_TOLERANCE_MS`` a call, or down to ``DEVICE_FLOOR`` of its event time where that is higher (kernels
    whose events are under about 5 us), and one that spoils them is timed the same way. (An honest call whose events
    hold host time, one timed without the gate's release, is held above its span too.)"""
    return [min(max(d, m - below, DEVICE_FLOOR * m), b) for m, b, d in zip(ms, bound, device, strict=True)]


def comparator_device_times(bound: list[float], device: list[float]) -> list[float]:
    """A comparator's latencies (ms) by its CUPTI spans ``device``, each held at most at its call's upper
    ``bound``. Its twin runs no candidate code, so the spans stand even where they lie far below the events:
    held within 5 us of them (until the eleventh session, docs/gpu-results.md), a torch.matmul of about 27 us
    read as 85.8 us in an evaluation whose events ran a median 63.5 us past its spans."""
    return [min(d, b) for b, d in zip(bound, device, strict=True)]


def events_over_span(ms: list[float], device: list[float]) -> float:
    """The median of ``ms - device`` over calls (ms): what CUDA events add to the calls' CUPTI spans."""
    return stats.percentile(sorted(m - d for m, d in zip(ms, device, strict=True)), 50)


def timing_basis(
    cand_ms: list[float], cand_bound: list[float], ref_ms: list[float], ref_bound: list[float]
) -> tuple[str, float]:
    """``("events", gap)`` normally; ``("device-synchronized", gap)`` when the candidate's work outlives its
    end event (launched on another stream) by more than ``max(HIDDEN_WORK_MS, 25% of its latency)`` beyond
    what the reference shows. Then both sides are timed by the device-synchronized bound, so the speedup
    stays a like-for-like comparison. ``gap`` is the median extra time in ms."""
    cand_gap = stats.percentile(sorted(b - m for m, b in zip(cand_ms, cand_bound, strict=True)), 50)
    ref_gap = stats.percentile(sorted(b - m for m, b in zip(ref_ms, ref_bound, strict=True)), 50)
    hidden = cand_gap - ref_gap
    median = stats.percentile(sorted(cand_ms), 50)
    if hidden > max(HIDDEN_WORK_MS, 0.25 * median):
        return "device-synchronized", hidden
    return "events", hidden


OVERWRITE_EXCESS_MS = 0.01
"""Median slowdown (ms) of the cold-L2 overwrite in the candidate's calls, beyond the reference's, above
which the result carries a note (and the fraction below, when larger). Not yet calibrated on a GPU: the
measured overwrite also holds the host's delay before its first pass, which differs a little between the
two workers."""
OVERWRITE_EXCESS_FRACTION = 0.1
"""The same threshold as a fraction of the reference's median overwrite time."""


def overwrite_excess(cand_overwrite: list[float], ref_overwrite: list[float]) -> dict[str, float | bool]:
    """How much longer the cold-L2 overwrite ran in the candidate's timed calls than in the reference's
    (medians, ms), and whether that exceeds ``max(OVERWRITE_EXCESS_MS, OVERWRITE_EXCESS_FRACTION x the
    reference's)``.

    Watches for: a candidate that launches its work on a stream of its own, which does not wait for the
    overwrite queued on the timed stream; work that finishes while the overwrite still runs is in neither
    of :func:`fibserve.bench.worker.clock.time_call`'s bounds, and shows only as the overwrite running longer.
    This is a flag for the reader (a note on the result), not a verdict: compute-light work can overlap the
    overwrite without slowing it, and the times are the worker's own report (a candidate that forges its
    replies reports whatever it likes), so it catches honest use of another stream, not a determined cheat.
    """
    if not cand_overwrite or not ref_overwrite:
        return {"candidate_ms": 0.0, "reference_ms": 0.0, "excess_ms": 0.0, "flagged": False}
    cand = stats.percentile(sorted(cand_overwrite), 50)
    ref = stats.percentile(sorted(ref_overwrite), 50)
    excess = cand - ref
    flagged = excess > max(OVERWRITE_EXCESS_MS, OVERWRITE_EXCESS_FRACTION * ref)
    return {"candidate_ms": cand, "reference_ms": ref, "excess_ms": excess, "flagged": flagged}
