"""The clock of the worker processes (the candidate's sandbox worker and the timing twins): one timed call.

One timed call (GPU): ``torch.cuda.synchronize()`` (device-wide), overwrite the cold-L2 buffer, record a
start event, call, record an end event, synchronize, read ``elapsed_time`` in ms (:func:`time_call` has the
details, and the upper bound that catches work on other streams). On CPU the same sequence uses
``time.perf_counter`` (and is never reported as a GPU speedup).

Before every timed call the overwrite also clears the persisting-L2 carve-out and lines, and where it can it
is the gate kernel that holds every SM until it ends (:mod:`fibserve.bench.worker.l2_state`). The gate's last
pass also waits until the host has queued the whole call behind it and *releases* it, so the call runs from a
full queue: host launch latency is never timed, however slow or loaded the host (a worker that slept through
a long neighbour wakes slowly: docs/gpu-results.md, seventh session).

This module imports only torch, the standard library and :mod:`fibserve.bench.worker.l2_state` (Triton only
where a gate is built): the worker imports it. The trusted side's statistics over these times are in
:mod:`fibserve.bench.timing.statistics`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

import torch

from fibserve.bench.worker.l2_state import Gate, reset_persisting_l2

DEFAULT_L2_BYTES = 64 << 20
"""L2 size assumed when the device does not report one (larger than any current NVIDIA L2, 60 MB on H100)."""


def cold_l2_bytes(device: torch.device) -> int:
    """Bytes overwritten before each timed call on ``device``: twice its L2 size (``DEFAULT_L2_BYTES`` when
    the device does not report one); 0 on CPU."""
    if device.type != "cuda":
        return 0
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    return 2 * (l2 or DEFAULT_L2_BYTES)


PRE_CALL_MS = 0.1
"""Least GPU time (ms) of the cold-L2 overwrite queued ahead of a timed call. Without the gate's release (no
Triton, or a call that waits on the GPU from the host) the host reaches the call's launch while the overwrite
runs, so host launch latency up to about this long (less the host's own time to queue the overwrite) is not
timed as GPU work. On the H200 a torch.matmul reference once timed 2% slow for a whole evaluation with a
single 2 x L2 pass (docs/gpu-results.md, third session)."""

RELEASE_WAIT_MS = 50.0
"""Longest time (ms) the gate waits for the host's release after its hold. A call that waits on the GPU
from the host (a synchronize, ``.item()``, more launches than the queue holds, or the first launch of a
kernel, which CUDA's lazy loading may make wait for the device) cannot be queued behind a gate that waits for
it: the gate gives up after this long and that call is timed again without the release."""

RELEASE_HOST_MS = 0.25
"""Most host time (ms) to queue a call that the release should absorb on most calls. The trusted side checks
each worker's round trip against the times it reports (:func:`fibserve.bench.timing.checks.unexplained_round_trip`,
0.5 ms of allowance), and time the gate waited for the host is in the round trip but in no reported time: a
candidate that keeps the gate waiting longer than this on most calls (``SLOW_OF_WINDOW``; many launches from
Python) is timed as before the release (its host time in its latency), not refused."""

STALLS_BEFORE_OFF = 2
"""Calls in a row that stall the gate's release (the gate gave up waiting) after which a :class:`ColdL2` stops
using it: one stall is usually a kernel's first launch (lazy loading); a call that waits on the GPU every time
stalls every time, and each stall costs ``RELEASE_WAIT_MS``."""

SLOW_WINDOW = 8
"""The latest waiting calls over which :class:`ColdL2` counts those that kept the gate waiting longer than
``RELEASE_HOST_MS`` (stalls included)."""

SLOW_OF_WINDOW = 5
"""How many of the latest ``SLOW_WINDOW`` waiting calls may keep the gate waiting longer than
``RELEASE_HOST_MS`` before a :class:`ColdL2` stops using the release: a majority means the call is slow to
queue; fewer are a host's passing delays, which the release absorbs. Until the twelfth session
(docs/gpu-results.md) two such calls in a row turned the release off: on the H100 with CUPTI recording, two
waits of 0.25 to 1.56 ms in a row came once in 30 to 150 calls, and turned it off for the rest of a worker's
evaluation in 4 of 5 evaluations; its later calls carried a median 44 to 90 us of host time each."""

RELEASE_ENV = "FIBSERVE_L2_RELEASE"
"""``0`` in the evaluating process's environment turns the release off (the gate only holds for its time)."""


GATE_HOLD_MS = 1.05 * PRE_CALL_MS
"""How long each program of the gated overwrite keeps its SM (ms): a little over ``PRE_CALL_MS``, so that one
gated pass lasts at least that long."""


GATE_ENV = "FIBSERVE_L2_GATE"
"""``0`` in the evaluating process's environment turns the gate off (the plain overwrite is used everywhere)."""


class OverwritePlan(NamedTuple):
    """How the cold-L2 overwrite runs on one device: ``passes`` over the buffer, ``solo_ms``, the fastest
    whole overwrite (all passes) timed alone on an otherwise idle device (ms), whether each pass is the
    gate kernel (``gate``) rather than a plain fill, and whether the last pass waits for the host's release
    (``release``, with the gate only)."""

    passes: int
    solo_ms: float
    gate: bool = False
    release: bool = False


class ColdL2:
    """A device buffer of at least ``2 x L2`` bytes, overwritten before each timed call so that no input or
    output stays in L2 from the previous call.

    The overwrite is repeated ``plan.passes`` times, enough for it to last at least ``PRE_CALL_MS``. The plan
    is measured here when none is given; the evaluating process measures it once per device
    (:func:`overwrite_plan`, when its Evaluator is created, before any of its workers start) and sends it to
    both workers, so the candidate's and the reference's are the same and the candidate cannot disturb its
    measurement. ``plan.solo_ms`` is 0 on CPU."""

    CALIBRATION_RUNS = 5

    def __init__(self, device: torch.device, plan: OverwritePlan | None = None):
        import os

        self.device = device
        nbytes = cold_l2_bytes(device)
        self.buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device) if nbytes else None
        self._value = 0
        self.plan = OverwritePlan(1, 0.0)
        want_gate = plan.gate if plan is not None else os.environ.get(GATE_ENV, "1") != "0"
        self.gate = self._gate() if want_gate and self.buffer is not None and device.type == "cuda" else None
        """The gate kernel, or None: the plain overwrite (no GPU, turned off, or it could not be built)."""
        want_release = plan.release if plan is not None else os.environ.get(RELEASE_ENV, "1") != "0"
        self.waits = bool(want_release and self.gate is not None and self.gate.releasable)
        """Whether the last pass waits for :meth:`release` (cleared for good by :meth:`note_release`)."""
        self.stalls = 0
        """Calls in a row whose release stalled."""
        self.slow: deque[bool] = deque(maxlen=SLOW_WINDOW)
        """Of the latest waiting calls, whether each kept the gate waiting longer than ``RELEASE_HOST_MS``."""
        self.released = False
        """Whether the latest timed call was queued whole behind the release (and timed so)."""
        if plan is not None:
            self.plan = OverwritePlan(
                max(1, int(plan.passes)), max(0.0, float(plan.solo_ms)), bool(plan.gate), self.waits
            )
        elif self.buffer is not None and device.type == "cuda":
            passes = max(1, math.ceil(PRE_CALL_MS / max(self._fastest(1), 1e-3)))
            self.plan = OverwritePlan(passes, self._fastest(passes), self.gate is not None, self.waits)

    def _gate(self) -> Gate | None:
        try:
            return Gate(self.buffer, GATE_HOLD_MS)  # type: ignore[arg-type]
        except Exception:  # no Triton, or a gate that would not fill the SMs: the plain overwrite
            return None

    def clear_persisting(self) -> None:
        """Clear the persisting-L2 carve-out and lines (:func:`fibserve.bench.worker.l2_state.reset_persisting_l2`);
        :func:`time_call` does it before every timed call, ahead of its first event.

        Raises:
            fibserve.bench.worker.l2_state.L2StateError: the carve-out could not be cleared.
        """
        reset_persisting_l2(self.device)

    def flush(self, wait: bool = False) -> None:
        """Overwrite the whole buffer ``plan.passes`` times (a different value each time, so nothing can
        short-circuit it); with ``wait`` (and :attr:`waits`) the last pass then holds every SM until
        :meth:`release` or ``RELEASE_WAIT_MS``."""
        self._overwrite(self.plan.passes, wait and self.waits)

    def note_release(self, stalled: bool, waited_ms: float) -> None:
        """Count one call that waited for the release: whether the gate gave up waiting (``stalled``) and how
        long it waited for the host (ms). Stops using the release (:attr:`waits`) after ``STALLS_BEFORE_OFF``
        stalls in a row, or once ``SLOW_OF_WINDOW`` of the latest ``SLOW_WINDOW`` calls stalled or waited
        longer than ``RELEASE_HOST_MS``."""
        self.stalls = self.stalls + 1 if stalled else 0
        self.slow.append(stalled or waited_ms > RELEASE_HOST_MS)
        if self.stalls >= STALLS_BEFORE_OFF or sum(self.slow) >= SLOW_OF_WINDOW:
            self.waits = False

    def release(self) -> None:
        """Release the last pass of the latest :meth:`flush` (no-op when it does not wait)."""
        if self.gate is not None:
            self.gate.release(self._value)

    def mark(self) -> None:
        """Leave an end mark in CUPTI's records (:meth:`~fibserve.bench.worker.l2_state.Gate.mark`; no-op
        without the gate kernel)."""
        if self.gate is not None:
            self.gate.mark()

    def waited_ms(self) -> float:
        """How long (ms) the latest waiting pass held the SMs for the release after its hold (0 without)."""
        return self.gate.waited_ms() if self.gate is not None else 0.0

    def _overwrite(self, passes: int, wait: bool = False) -> None:
        if self.buffer is not None:
            for i in range(passes):
                self._value = (self._value + 1) & 0x7FFFFFFF
                if self.gate is not None:
                    self.gate.launch(self._value, RELEASE_WAIT_MS if wait and i == passes - 1 else 0.0)
                else:
                    self.buffer.fill_(self._value)

    def _fastest(self, passes: int) -> float:
        """The fastest of ``CALIBRATION_RUNS`` overwrites of ``passes`` passes, timed with CUDA events (ms).
        One untimed pass runs first, so the host has queued the timed ones before the start event records
        and its launch latency is not measured."""
        times = []
        stream = torch.cuda.current_stream(self.device)  # the one fill_ runs on, whatever the current device
        for _ in range(self.CALIBRATION_RUNS):
            torch.cuda.synchronize(self.device)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._overwrite(1)
            begin.record(stream)
            self._overwrite(passes)
            end.record(stream)
            end.synchronize()
            times.append(float(begin.elapsed_time(end)))
        return min(times)


_PLANS: dict[str, OverwritePlan] = {}


_PLANS_LOCK = threading.Lock()


def overwrite_plan(device: str) -> OverwritePlan:
    """The cold-L2 overwrite plan of ``device`` (``cpu`` or ``cuda:N``), measured once per process (under a
    lock, so that two lanes on one device do not measure against each other). The
    :class:`fibserve.bench.Evaluator` measures it when it is created, before its workers start."""
    with _PLANS_LOCK:
        if device not in _PLANS:
            _PLANS[device] = ColdL2(torch.device(device)).plan
        return _PLANS[device]


class Timed(NamedTuple):
    """One timed call (ms): see :func:`time_call`."""

    ms: float
    bound_ms: float
    overwrite_ms: float
    attempts: int = 1


def time_call(
    fn: Callable[[], object],
    device: torch.device,
    flush: ColdL2 | None,
    mark: bool = False,
    warmup: bool = False,
) -> Timed:
    """Run ``fn`` once, timed.

    GPU: clear persisting L2 (if ``flush``), device-wide synchronize, record a first event, enqueue the L2
    overwrite (if ``flush``; the gate kernel where it could be built), record a start event, call ``fn``,
    record an end event, *release* the gate, device-wide synchronize again, record a last event. Where the
    gate waits for its release (:attr:`ColdL2.waits`), every launch of ``fn`` is queued before the GPU leaves
    the gate, so ``fn`` runs from a full queue and no host launch latency is timed (a short kernel's time
    is then its GPU time plus the events' own). If the gate gave up waiting before its release (``fn`` waited
    on the GPU from the host, or took longer than ``RELEASE_WAIT_MS`` to queue), the call is timed again
    without the release (after ``STALLS_BEFORE_OFF`` such calls in a row, or once ``SLOW_OF_WINDOW`` of the
    last ``SLOW_WINDOW`` calls stalled or kept the gate waiting longer than ``RELEASE_HOST_MS``, the release is
    not used again, :meth:`ColdL2.note_release`; warm-up calls do not count; :attr:`ColdL2.released` says
    whether the latest call was released). Without the release the overwrite is enqueued *after* the synchronize so
    that the host reaches ``fn``'s launch while the GPU is still busy: host launch latency shorter than the
    overwrite is then not timed (benchmarks/launch_latency.py).

    - ``ms``: start -> end on the current stream (the latency).
    - ``bound_ms``: an upper bound meant to cover work the call launched on *other* streams too (plus one
      host synchronisation, a few microseconds): start -> last event behind a gate kernel that fills every SM
      until it ends (:attr:`~fibserve.bench.worker.l2_state.Gate.fills`), so no block of the call's
      side-stream work starts before the start event; behind the plain overwrite (or a gate that leaves warp
      slots free), the larger of that and first -> last event minus ``flush.plan.solo_ms``,
      because side-stream work does not wait for a plain fill: in the H200 suite (docs/gpu-results.md, third
      session) a naive GEMM on a private stream left a median 32.6 ms per call unexplained by start -> last
      event, and with the second form it was timed at 35.7 ms (35.6 ms on the main stream). (The second form
      also holds the host's delay before the overwrite's first pass, which differs between released and
      unreleased calls: behind the gate it would tell them apart as hidden work.)
    - ``overwrite_ms``: first -> start less the release wait, the overwrite as it ran in this call (with the
      host's delay before its first pass, since the first event records on an idle GPU). Side-stream work
      that runs *during* the overwrite and finishes before it is not in either bound, except as far as it
      slows the overwrite: the caller compares ``overwrite_ms`` with the reference's
      (:func:`fibserve.bench.timing.checks.overwrite_excess`).

    A ``warmup`` call is timed the same way but does not count towards turning the release off
    (:meth:`ColdL2.note_release`): first launches stall it (a new kernel's lazy loading, a library's first
    workspace allocation), and on the H100 a twin's release was off for most of the calls of the first
    evaluation of M=8192, where its first launches happen (docs/gpu-results.md, twelfth session).

    - ``attempts``: 2 for a call timed again after its release stalled, else 1. Each attempt begins with the
      overwrite's gate kernels and, with ``mark``, ends with the gate's end mark (:meth:`ColdL2.mark`, after
      the last event): :mod:`fibserve.bench.worker.kernel_span` reads each call's GPU time between them.

    CPU: ``perf_counter`` around ``fn`` (``ms`` and ``bound_ms`` equal, ``overwrite_ms`` 0).
    """
    if device.type != "cuda":
        start = time.perf_counter()
        fn()
        ms = (time.perf_counter() - start) * 1e3
        return Timed(ms, ms, 0.0)
    if flush is None:
        return _timed(fn, device, None, wait=False)[0]
    wait = flush.waits
    timed, stalled = _timed(fn, device, flush, wait=wait, mark=mark)
    if wait and not warmup:
        flush.note_release(stalled, flush.waited_ms())
    flush.released = wait and not stalled
    if stalled:
        timed = _timed(fn, device, flush, wait=False, mark=mark)[0]._replace(attempts=2)
    return timed


def _timed(
    fn: Callable[[], object], device: torch.device, flush: ColdL2 | None, wait: bool, mark: bool = False
) -> tuple[Timed, bool]:
    """One GPU call as :func:`time_call` describes, with the gate waiting for its release or not (and its end
    marked with ``mark``); also whether the gate let go before it was released (it ran out of
    ``RELEASE_WAIT_MS``)."""
    if flush is not None:
        flush.clear_persisting()
    torch.cuda.synchronize(device)
    first, begin, end, done = (torch.cuda.Event(enable_timing=True) for _ in range(4))
    stream = torch.cuda.current_stream(device)
    first.record(stream)
    if flush is not None:
        flush.flush(wait)
    begin.record(stream)
    stalled = False
    try:
        fn()
        end.record(stream)
        stalled = wait and bool(begin.query())  # the gate already ended: it did not wait for this release
    finally:  # released even when the call raised, so that the gate does not run out its wait
        if wait and flush is not None:
            flush.release()
    torch.cuda.synchronize(device)
    done.record(stream)
    done.synchronize()
    if mark and flush is not None:
        flush.mark()
    waited = flush.waited_ms() if wait and flush is not None else 0.0
    overwrite = max(0.0, float(first.elapsed_time(begin)) - waited)
    bound = float(begin.elapsed_time(done))
    if flush is not None and (flush.gate is None or not flush.gate.fills):
        bound = max(bound, float(first.elapsed_time(done)) - flush.plan.solo_ms)
    return Timed(float(begin.elapsed_time(end)), bound, overwrite), stalled
