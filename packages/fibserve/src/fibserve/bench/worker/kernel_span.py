"""The device time of each timed call from CUPTI's activity records: first start to last end of its GPU work.

CUDA events around a call time the events' own work as well as the call's: recording the start event behind
the queue, dispatching the first kernel, recording the end event. On the H200 that adds 2.4 to 3.1 us to any
kernel, whatever the host does (docs/gpu-results.md, eighth session: a one-element add read 3.30 us with
events, 0.93 us in CUPTI), so a 1.6 us kernel read 2.6x its GPU time. CUPTI timestamps each kernel, copy and
memset on the GPU itself, as Nsight Systems shows them.

:class:`SpanRecording` keeps CUPTI's activity recording (:mod:`fibserve.bench.worker.cupti`, CUPTI's own API
through ctypes) on across a worker's timed calls and reads it when the trusted side asks (once a trial) or before
the worker runs anything else. Starting and stopping a recording around every call (through ``torch.profiler``
then) cost 2.7 to 4 ms of host time per call on the H200 (docs/gpu-results.md, ninth session). Each timed attempt
begins with the cold-L2 overwrite's ``passes`` launches of the gate kernel
(:mod:`fibserve.bench.worker.l2_gate_kernel`), which hold every SM until the call is queued, and ends, once the
device is synchronized, with one more launch of it that does nothing
(:meth:`fibserve.bench.worker.l2_state.Gate.mark`). An attempt's work is every activity, on any stream, that ends
after its last overwrite pass and starts before its end mark: what the worker runs after a call (copying a
returned value into the outputs) is after the mark. Its span runs from the first such activity's start to the
last one's end (gaps between the call's kernels included, as they are part of its latency); a call that was timed
again (:func:`fibserve.bench.worker.clock.time_call`) is its last attempt. A recording that lost any record has no
spans.

The worker imports this module; it uses only the standard library (and CUPTI and torch, once a recording starts).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

KERNEL_SPAN_ENV = "FIBSERVE_KERNEL_SPAN"
"""``0`` in the evaluating process's environment turns the CUPTI spans off (:func:`requested`); they are on by
default since 2026-12-05 (docs/gpu-results.md, thirteenth session: the GPU suite's timing, zygote, attention and
reference-solution tests passed with them, and each worker loads CUPTI in about 20 ms as it starts). Off, every
latency is on CUDA events, which add 2.4 to 3.1 us to any kernel."""


def requested() -> bool:
    """Whether the evaluating process asks its GPU workers for spans (unless ``FIBSERVE_KERNEL_SPAN=0``). Read by
    the trusted side only: the timing loop, and the pool, whose workers then load CUPTI as they start
    (:meth:`SpanRecording.warm`)."""
    return os.environ.get(KERNEL_SPAN_ENV, "1") != "0"


Activity = tuple[str, float, float]
"""One GPU activity record: ``(name, start_us, end_us)``."""


class SpanRecording:
    """CUPTI activity recording across timed calls: :meth:`start` once, :meth:`add` each timed call's
    attempt count, :meth:`finish` for each call's span (ms).

    Never raises: a recording that cannot start (no CUPTI, another profiler holding it) or that lost records
    gives no spans, and the trusted side keeps the calls' CUDA-event times.
    """

    def __init__(self) -> None:
        self._activities: Any = None
        self.attempts: list[int] = []
        """Attempts of each timed call recorded since :meth:`start` (2 for a call timed again)."""
        self.passes = 1
        """Gate kernels at the start of every attempt (the overwrite plan's passes); one more marks its end."""

    @property
    def on(self) -> bool:
        """Whether the recording runs."""
        return self._activities is not None

    def start(self, passes: int) -> None:
        """Start recording (no-op when it runs); each attempt begins with ``passes`` gate kernels and ends with
        the gate's end mark. The first start in a process loads CUPTI (13 ms on the H100 machine,
        docs/gpu-results.md, thirteenth session; :meth:`warm` does it as a worker starts)."""
        if self._activities is not None:
            return
        self.attempts, self.passes = [], max(1, int(passes))
        try:
            from fibserve.bench.worker.cupti import activities

            recording = activities()
            recording.enable()
            self._activities = recording
        except Exception:
            self._activities = None
            self.attempts = []

    def warm(self) -> None:
        """Load CUPTI now, with an empty recording started and stopped: a GPU worker does this as it starts when
        the trusted side will ask it for spans (:func:`requested`)."""
        self.start(1)
        self.finish("")

    def add(self, attempts: int) -> None:
        """Count one timed call of ``attempts`` attempts (ignored when the recording does not run)."""
        if self._activities is not None:
            self.attempts.append(int(attempts))

    def finish(self, gate: str) -> list[float | None]:
        """Stop recording; the span (ms) of each call added since :meth:`start`, in order (None where it
        could not be read; all None when records were lost or do not match the calls, see :func:`call_spans`).
        [] when the recording did not run."""
        if self._activities is None:
            return []
        recording, attempts = self._activities, self.attempts
        self._activities, self.attempts = None, []
        try:
            import torch

            if torch.cuda.is_initialized():  # CUPTI's flush waits for nothing: the end mark may still run
                torch.cuda.synchronize()
            records, lost = recording.collect()
        except Exception:
            return [None] * len(attempts)
        if lost:
            return [None] * len(attempts)
        return call_spans(relative_us(records), attempts, self.passes, gate)


def relative_us(records: Sequence[tuple[str, int, int]]) -> list[Activity]:
    """Activity records ``(name, start_ns, end_ns)`` (integer ns, as CUPTI gives them) as
    ``(name, start_us, end_us)`` from the earliest start. The subtraction is done in integers first: an epoch
    time in us as a float (about 1.80e15) is a multiple of 0.25 us: every span came out on 0.25 us steps (a
    torch.add of 1.63 us in CUPTI at 1.50, a 25.84 us GEMM at 26.25; docs/gpu-results.md, eleventh session)."""
    base = min((start for _, start, _ in records), default=0)
    return [(name, (start - base) / 1e3, (end - base) / 1e3) for name, start, end in records]


def call_spans(
    events: Sequence[Activity], attempts: Sequence[int], passes: int, gate: str
) -> list[float | None]:
    """The span (ms) of each timed call from its GPU activity records (see the module docstring): ``events``
    as ``(name, start_us, end_us)``, ``attempts`` per call, each attempt recorded as ``passes`` gate kernels
    named ``gate``, its work, and one more ``gate`` record (the end mark). A call whose last attempt ran no
    work has None. All None when the gate records are not ``passes + 1`` per attempt (a record lost, or a
    candidate's kernel named like the gate): which work is whose cannot then be told."""
    per_attempt = passes + 1
    gates = sorted((start, end) for name, start, end in events if name == gate)
    if passes < 1 or len(gates) != per_attempt * sum(attempts):
        return [None] * len(attempts)
    work = [(start, end) for name, start, end in events if name != gate]
    spans: list[float | None] = []
    attempt = -1
    for count in attempts:
        attempt += count
        first = attempt * per_attempt
        opened = max(end for _, end in gates[first : first + passes])
        closed = gates[first + passes][0]
        mine = [(start, end) for start, end in work if end > opened and start < closed]
        spans.append((max(e for _, e in mine) - min(s for s, _ in mine)) / 1e3 if mine else None)
    return spans
