"""Timing primitives of the worker processes (the candidate's sandbox worker and the reference's twin).

One timed call (GPU): ``torch.cuda.synchronize()`` (device-wide), overwrite the cold-L2 buffer, record a
start event, call, record an end event, synchronize, read ``elapsed_time`` in ms (:func:`time_call` has the
details, and the upper bound that catches work on other streams). On CPU the same sequence uses
``time.perf_counter`` (and is never reported as a GPU speedup). Statistics use linear-interpolated percentiles
(the same definition as ``numpy.percentile``'s default).

This module imports only torch and the standard library: the worker imports it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

DEFAULT_L2_BYTES = 64 << 20
"""L2 size assumed when the device does not report one (larger than any current NVIDIA L2, 60 MB on H100)."""


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, linear interpolation; NaN when empty."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass
class LatencyStats:
    """Summary of latency samples in milliseconds."""

    median: float
    p10: float
    p90: float
    mean: float
    min: float
    max: float
    count: int

    def as_dict(self) -> dict[str, float]:
        """Plain dict for JSON."""
        return asdict(self)


def summarize(samples: Sequence[float]) -> LatencyStats:
    """Median, p10, p90, mean, min, max and count of ``samples`` (ms)."""
    values = sorted(samples)
    if not values:
        return LatencyStats(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    return LatencyStats(
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


def cold_l2_bytes(device: torch.device) -> int:
    """Bytes overwritten before each timed call on ``device``: twice its L2 size (``DEFAULT_L2_BYTES`` when
    the device does not report one); 0 on CPU."""
    if device.type != "cuda":
        return 0
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    return 2 * (l2 or DEFAULT_L2_BYTES)


PRE_CALL_MS = 0.1
"""Least GPU time (ms) of the cold-L2 overwrite queued ahead of a timed call. The host reaches the call's
launch while the overwrite runs, so host launch latency up to this long is not timed as GPU work (on the H200,
with a single 2 x L2 pass of about 0.03 ms, a torch.matmul reference once timed 2% slow for a whole
evaluation: docs/gpu-results.md, third session)."""


class ColdL2:
    """A device buffer of at least ``2 x L2`` bytes, overwritten before each timed call so that no input or
    output stays in L2 from the previous call.

    The overwrite is repeated ``passes`` times, enough for it to last at least ``PRE_CALL_MS`` (measured once
    here on an otherwise idle device); ``solo_ms`` is the fastest whole overwrite seen then (ms; 0 on CPU),
    which :func:`time_call` subtracts when its upper bound starts before the overwrite."""

    CALIBRATION_RUNS = 5

    def __init__(self, device: torch.device):
        self.device = device
        nbytes = cold_l2_bytes(device)
        self.buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device) if nbytes else None
        self._value = 0
        self.passes = 1
        self.solo_ms = 0.0
        if self.buffer is not None and device.type == "cuda":
            self.passes = max(1, math.ceil(PRE_CALL_MS / max(self._fastest(), 1e-3)))
            self.solo_ms = self._fastest()

    def flush(self) -> None:
        """Overwrite the whole buffer ``passes`` times (a different value each time, so nothing can
        short-circuit it)."""
        if self.buffer is not None:
            for _ in range(self.passes):
                self._value = (self._value + 1) & 0x7FFFFFFF
                self.buffer.fill_(self._value)

    def _fastest(self) -> float:
        """The fastest of ``CALIBRATION_RUNS`` whole overwrites, timed alone with CUDA events (ms)."""
        times = []
        for _ in range(self.CALIBRATION_RUNS):
            torch.cuda.synchronize(self.device)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            self.flush()
            end.record()
            end.synchronize()
            times.append(float(begin.elapsed_time(end)))
        return min(times)


def time_call(fn: Callable[[], object], device: torch.device, flush: ColdL2 | None) -> tuple[float, float]:
    """Run ``fn`` once, timed; returns ``(ms, bound_ms)`` in milliseconds.

    GPU: device-wide synchronize, record a first event, enqueue the L2 overwrite (if ``flush``), record a
    start event, call ``fn``, record an end event, device-wide synchronize again, record a last event. The
    overwrite is enqueued *after* the synchronize so that the host reaches ``fn``'s launch while the GPU is
    still busy: host launch latency shorter than the overwrite (at least ``PRE_CALL_MS``) is then not timed as
    GPU work (benchmarks/launch_latency.py measures the difference; longer host work still is). ``ms`` is start -> end
    on the current stream (the latency).

    ``bound_ms`` is an upper bound that also covers work the call launched on *other* streams (plus one host
    synchronisation, a few microseconds): the larger of start -> last event and first -> last event minus
    the overwrite's time alone (``flush.solo_ms``). The second form is needed because side-stream work does
    not wait for the overwrite: on the H200 (docs/gpu-results.md, third session) a naive GEMM launched on a
    private stream ran its 35 ms alongside the overwrite, which finished, and so let the start event record,
    only near the GEMM's end; start -> last event saw about 3 ms of it. Work that truly overlaps the
    overwrite can be under-counted by at most ``solo_ms`` (tens of microseconds). A kernel that hides its
    work on a side stream has ``ms`` near zero but a large ``bound_ms``; the caller compares the two.
    CPU: ``perf_counter`` around ``fn`` (both values equal).
    """
    if device.type != "cuda":
        start = time.perf_counter()
        fn()
        ms = (time.perf_counter() - start) * 1e3
        return ms, ms
    torch.cuda.synchronize(device)
    first, begin, end, done = (torch.cuda.Event(enable_timing=True) for _ in range(4))
    stream = torch.cuda.current_stream(device)
    first.record(stream)
    if flush is not None:
        flush.flush()
    begin.record(stream)
    fn()
    end.record(stream)
    torch.cuda.synchronize(device)
    done.record(stream)
    done.synchronize()
    solo = flush.solo_ms if flush is not None else 0.0
    bound = max(float(begin.elapsed_time(done)), float(first.elapsed_time(done)) - solo)
    return float(begin.elapsed_time(end)), bound
