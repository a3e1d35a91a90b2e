"""The device time of each timed call from CUPTI's activity records: first start to last end of its GPU work.

CUDA events around a call time the events' own work as well as the call's: recording the start event behind
the queue, dispatching the first kernel, recording the end event. On the H200 that adds 2.4 to 3.1 us to any
kernel, whatever the host does (docs/gpu-results.md, eighth session: a one-element add read 3.30 us with
events, 0.93 us in CUPTI), so a 1.6 us kernel read 2.6x its GPU time. CUPTI timestamps each kernel, copy and
memset on the GPU itself, as Nsight Systems shows them.

:class:`SpanRecording` keeps CUPTI's activity recording (through ``torch.profiler``, whose libkineto drives
CUPTI) on across a worker's timed calls and reads it when the trusted side asks (once a trial) or before the
worker runs anything else. Starting and stopping the profiler around every call cost 2.7 to 4 ms of host time
per call on the H200 (ninth session), and CUPTI then instruments every kernel's launch anew. Each timed
attempt begins with the cold-L2 overwrite's ``passes`` gate kernels (:mod:`fibserve.bench.worker.l2_gate_kernel`),
which hold every SM until the call is queued; an attempt's work is every activity, on any stream, that ends
after its last gate kernel and starts before the next attempt's first one (a timed call synchronizes the
device before it returns, so nothing of it runs later). Its span runs from the first such activity's start to
the last one's end (gaps between the call's kernels included, as they are part of its latency); a call that
was timed again (:func:`fibserve.bench.worker.clock.time_call`) is its last attempt. The worker imports this
module; it uses only torch and the standard library.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

Activity = tuple[str, float, float]
"""One GPU activity record: ``(name, start_us, end_us)``."""


class SpanRecording:
    """CUPTI activity recording across timed calls: :meth:`start` once, :meth:`add` each timed call's
    attempt count, :meth:`finish` for each call's span (ms).

    Never raises: a profiler that cannot start (another profiler running in this process, no CUPTI) or stop
    gives no spans, and the trusted side keeps the calls' CUDA-event times.
    """

    def __init__(self) -> None:
        self._profile: Any = None
        self.attempts: list[int] = []
        """Attempts of each timed call recorded since :meth:`start` (2 for a call timed again)."""
        self.passes = 1
        """Gate kernels at the start of every attempt (the overwrite plan's passes)."""

    @property
    def on(self) -> bool:
        """Whether the recording runs."""
        return self._profile is not None

    def start(self, passes: int) -> None:
        """Start recording (no-op when it runs); each attempt begins with ``passes`` gate kernels."""
        if self._profile is not None:
            return
        self.attempts, self.passes = [], max(1, int(passes))
        try:
            from torch.profiler import ProfilerActivity, profile

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                profile_ = profile(activities=[ProfilerActivity.CUDA])
                profile_.__enter__()
            self._profile = profile_
        except Exception:
            self._profile = None
            self.attempts = []

    def add(self, attempts: int) -> None:
        """Count one timed call of ``attempts`` attempts (ignored when the recording does not run)."""
        if self._profile is not None:
            self.attempts.append(int(attempts))

    def finish(self, gate: str) -> list[float | None]:
        """Stop recording; the span (ms) of each call added since :meth:`start`, in order (None where it
        could not be read; all None when the records do not match the calls, see :func:`call_spans`).
        [] when the recording did not run."""
        if self._profile is None:
            return []
        profile_, attempts = self._profile, self.attempts
        self._profile, self.attempts = None, []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                profile_.__exit__(None, None, None)
                events = [
                    (e.name, float(e.time_range.start), float(e.time_range.end))
                    for e in profile_.events()
                    if getattr(e.device_type, "name", "") == "CUDA"
                ]
        except Exception:
            return [None] * len(attempts)
        return call_spans(events, attempts, self.passes, gate)


def warm_kernel_span() -> None:
    """Start and stop CUPTI's recording once (libkineto's first start initialises it, about a second on this
    project's CPU machine): a worker does it while it starts, so that its first timed call does not. Not in
    the zygote: the initialisation asks the CUDA driver for its devices, and a process forked after that
    cannot use CUDA."""
    recording = SpanRecording()
    recording.start(1)
    recording.finish("")


def call_spans(
    events: Sequence[Activity], attempts: Sequence[int], passes: int, gate: str
) -> list[float | None]:
    """The span (ms) of each timed call from its GPU activity records (see the module docstring): ``events``
    as ``(name, start_us, end_us)``, ``attempts`` per call, ``passes`` gate kernels named ``gate`` at the
    start of every attempt. A call whose last attempt ran no work has None. All None when the gate kernels
    recorded are not ``passes`` times the attempts (a record lost, or a candidate's kernel named like the
    gate): which work is whose cannot then be told."""
    gates = sorted((start, end) for name, start, end in events if name == gate)
    if len(gates) != passes * sum(attempts) or passes < 1:
        return [None] * len(attempts)
    work = [(start, end) for name, start, end in events if name != gate]
    opens = [max(end for _, end in gates[k : k + passes]) for k in range(0, len(gates), passes)]
    closes = [gates[k][0] for k in range(passes, len(gates), passes)] + [float("inf")]
    spans: list[float | None] = []
    attempt = -1
    for count in attempts:
        attempt += count
        mine = [(start, end) for start, end in work if end > opens[attempt] and start < closes[attempt]]
        spans.append((max(e for _, e in mine) - min(s for s, _ in mine)) / 1e3 if mine else None)
    return spans
