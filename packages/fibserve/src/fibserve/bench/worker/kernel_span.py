"""The device time of one timed call from CUPTI's activity records: first start to last end of its GPU work.

CUDA events around a call time the events' own work as well as the call's: recording the start event behind
the queue, dispatching the first kernel, recording the end event. On the H200 that adds 2.4 to 3.1 us to any
kernel, whatever the host does (docs/gpu-results.md, eighth session: a one-element add read 3.30 us with
events, 0.93 us in CUPTI), so a 1.6 us kernel read 2.6x its GPU time. CUPTI timestamps each kernel, copy and
memset on the GPU itself, as Nsight Systems shows them.

:class:`KernelSpan` records CUPTI activity (through ``torch.profiler``, whose libkineto drives CUPTI) while a
timed call runs. Behind the cold-L2 gate kernel (:mod:`fibserve.bench.worker.l2_gate_kernel`), which holds
every SM until the call is queued, the call's work is every activity still running after the last gate
kernel ended, on any stream; its span is from the first such activity's start to the last one's end (gaps
between the call's kernels included, as they are part of its latency). The worker imports this module; it
uses only torch and the standard library.
"""

from __future__ import annotations

import warnings
from typing import Any


class KernelSpan:
    """Context manager: records the GPU's activity while open; :meth:`span_ms` then gives the call's span.

    Never raises: a profiler that cannot start (another profiler running in this process, no CUPTI) or
    stop leaves :meth:`span_ms` None, and the caller keeps its CUDA-event times.
    """

    def __init__(self) -> None:
        self._profile: Any = None
        self._events: list[Any] = []

    def __enter__(self) -> KernelSpan:
        try:
            from torch.profiler import ProfilerActivity, profile

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                profile_ = profile(activities=[ProfilerActivity.CUDA])
                profile_.__enter__()
            self._profile = profile_
        except Exception:
            self._profile = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._profile is None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._profile.__exit__(None, None, None)
                self._events = [
                    (e.name, float(e.time_range.start), float(e.time_range.end))
                    for e in self._profile.events()
                    if getattr(e.device_type, "name", "") == "CUDA"
                ]
        except Exception:
            self._events = []
        self._profile = None

    def span_ms(self, after: str) -> float | None:
        """The call's span (ms): over the GPU activities recorded that were still running after the last
        activity named ``after`` (the gate kernel) ended, from the first one's start to the last one's end.
        None when nothing was recorded, no ``after`` activity was, or nothing ran after it."""
        return span_after(self._events, after)


def warm_kernel_span() -> None:
    """Start and stop CUPTI's recording once (libkineto's first start initialises it, about a second on this
    project's CPU machine): a worker does it while it starts, so that its first timed call does not. Not in
    the zygote: the initialisation asks the CUDA driver for its devices, and a process forked after that
    cannot use CUDA."""
    with KernelSpan():
        pass


def span_after(events: list[tuple[str, float, float]], after: str) -> float | None:
    """``events`` as ``(name, start_us, end_us)`` GPU activity records: the span (ms) of those not named
    ``after`` that end after the last ``after`` record ends (see :meth:`KernelSpan.span_ms`); None when
    there is none, or no ``after`` record."""
    gate_ends = [end for name, _, end in events if name == after]
    if not gate_ends:
        return None
    released = max(gate_ends)
    mine = [(start, end) for name, start, end in events if name != after and end > released]
    if not mine:
        return None
    return (max(end for _, end in mine) - min(start for start, _ in mine)) / 1e3
