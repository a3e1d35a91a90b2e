"""Other GPU work during the twins' calls (trusted side): the defences that keep a candidate from slowing what
it is compared with.

Anything the candidate's process keeps doing after its reply (a host thread that launches later, work on
another stream, another CUDA context) runs while a comparator's twin is timed, slows the twin and so inflates
the candidate's speedup. Three defences, applied by :func:`fibserve.bench.timing.loop.measure`:

- :func:`paused` (**candidate paused**): the candidate's sandbox (its worker and everything it started) is
  stopped with SIGSTOP for the whole of each comparator call and continued after it, so no host thread of the
  candidate can launch anything while a twin is timed. The twins are paused during the candidate's calls the
  same way, so that both sides reach every call alike (a stopped process takes one more wake-up to answer).
- :class:`BusyProbe` (**device idle**): right before each comparator call, with the candidate paused, the
  trusted process waits until the device is idle: it launches a one-element kernel on its own stream and
  waits for it (host wall clock, launch to completion) until two in a row come back within the idle bound
  (:func:`idle_round_trip_ms`, measured once per device before any worker starts, times ``IDLE_FACTOR``
  plus ``IDLE_SLACK_MS``). GPU work the candidate queued before its reply, on any stream or context, makes the
  probe wait for it, so the comparator starts on an idle device; the baseline of a kernel that leaves work
  running is no longer slowed by it. A device that does not become idle within ``IDLE_WAIT_S`` counts as
  busy for that call; CUDA-event times of the probes are kept too, and a median above ``BUSY_PROBE_MS``, or
  any call that found the device busy for good, means the twin was timed on a busy device: the candidate's
  fault (RUNTIME_ERROR) when no other process holds a context on the GPU, the environment's (a harness error)
  when one does.
- :func:`foreign_contexts` (**other contexts**): after timing, the processes with a context on the device
  (NVML, through ``nvidia-smi`` when pynvml is missing): one in the candidate's sandbox other than its
  worker means the candidate started another context (RUNTIME_ERROR); one outside every sandbox of this
  service means another tenant shares the GPU (a note on the result: its timings are suspect).

All three apply on a GPU only (``measure`` on CPU neither pauses nor probes: CPU timings are never reported as
speedups); :func:`paused` itself works anywhere, and the CPU tests show it stopping a candidate's thread.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator

import torch

from fibserve.bench.device import device_uuid, nvml_handle
from fibserve.bench.timing import statistics as stats
from fibserve.sandbox.watchdog import tree_pids

BUSY_PROBE_MS = 0.2
"""Median time (ms) of the one-element probe kernel before the comparator calls of one workload above which
the device counts as busy with another context's work. Not yet calibrated on a GPU: an idle H200 is expected
at a few microseconds (launch and event resolution), a time slice of another context at milliseconds."""

IDLE_FACTOR = 3.0
"""A probe's round trip counts as idle up to this many times the device's idle round trip (plus the slack)."""
IDLE_SLACK_MS = 0.05
"""Absolute slack (ms) on the idle bound, for host scheduling noise."""
IDLE_WAIT_S = 2.0
"""Longest wait (s) for the device to become idle before one comparator call."""

_IDLE: dict[str, float] = {}


@contextlib.contextmanager
def paused(pids: Iterable[int]) -> Iterator[None]:
    """SIGSTOP ``pids`` (host pids of the candidate's sandbox tree) for the duration, SIGCONT afterwards,
    even when the body raises. Processes that are gone are skipped. The caller must not call the candidate
    meanwhile (it would wait forever on a stopped worker)."""
    stopped = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
    try:
        yield
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)


def sandbox_pids(root: int) -> list[int]:
    """The host pids of a sandbox's tree (its bubblewrap process ``root`` and everything below it)."""
    return tree_pids(root)


def idle_round_trip_ms(device: torch.device) -> float:
    """The host round trip (ms) of the one-element probe on ``device`` when nothing else runs: the median of
    20, measured the first time it is asked for in this process (the Evaluator asks at its start, before any
    worker of its own exists) and kept; 0.0 on CPU."""
    if device.type != "cuda":
        return 0.0
    key = str(device)
    if key not in _IDLE:
        probe = BusyProbe(device, idle_ms=0.0)
        _IDLE[key] = stats.percentile(sorted(probe.round_trip()[1] for _ in range(20)), 50)
    return _IDLE[key]


class BusyProbe:
    """The trusted process's one-element probe kernel on ``device`` (see the module docstring); no-op on CPU.

    :meth:`wait_idle` probes until the device is idle and keeps the first probe's CUDA-event time in
    ``samples`` and the time waited in ``waits``; ``median_ms`` is the median of ``samples`` (0.0 when none) and
    ``stuck`` counts the calls for which the device never became idle.

    Args:
        idle_ms: the device's idle round trip (default: :func:`idle_round_trip_ms`).
    """

    def __init__(self, device: torch.device, idle_ms: float | None = None):
        self.device = device
        self.samples: list[float] = []
        self.waits: list[float] = []
        self.stuck = 0
        self._cuda = device.type == "cuda"
        if self._cuda:
            self._stream = torch.cuda.Stream(device)
            self._cell = torch.zeros(1, device=device)
            idle = idle_round_trip_ms(device) if idle_ms is None else idle_ms
            self.bound_ms = IDLE_FACTOR * idle + IDLE_SLACK_MS

    def round_trip(self) -> tuple[float, float]:
        """One probe: ``(event ms, host round trip ms)``, the kernel's time on the device and the host's wait
        from its launch to its completion."""
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        started = time.perf_counter()
        with torch.cuda.stream(self._stream):
            begin.record(self._stream)
            self._cell.add_(1.0)
            end.record(self._stream)
        end.synchronize()
        return float(begin.elapsed_time(end)), (time.perf_counter() - started) * 1e3

    def wait_idle(self) -> float:
        """Probe until two round trips in a row are within the idle bound, or ``IDLE_WAIT_S`` passes (then
        ``stuck`` grows); returns the milliseconds waited (0.0 on CPU)."""
        if not self._cuda:
            return 0.0
        started = time.perf_counter()
        deadline = started + IDLE_WAIT_S
        event_ms, wall_ms = self.round_trip()
        self.samples.append(event_ms)
        calm = int(wall_ms <= self.bound_ms)
        while calm < 2:
            if time.perf_counter() > deadline:
                self.stuck += 1
                break
            calm = calm + 1 if self.round_trip()[1] <= self.bound_ms else 0
        waited = (time.perf_counter() - started) * 1e3
        self.waits.append(waited)
        return waited

    @property
    def median_ms(self) -> float:
        """Median of the probes timed so far (ms; 0.0 when none)."""
        return stats.percentile(sorted(self.samples), 50) if self.samples else 0.0

    @property
    def busy(self) -> bool:
        """Whether the median probe exceeds ``BUSY_PROBE_MS``, or the device never became idle before a call."""
        return self.median_ms > BUSY_PROBE_MS or self.stuck > 0


def gpu_processes(device: torch.device) -> list[int] | None:
    """Host pids of the processes with a compute context on ``device`` (pynvml, else ``nvidia-smi``), or None
    when neither can say (CPU, no NVML)."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        handle = nvml_handle(pynvml, index)  # by UUID: NVML's indices ignore CUDA_VISIBLE_DEVICES
        return sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "-i", device_uuid(index) or str(index), "--query-compute-apps=pid", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted(int(line) for line in out.split() if line.strip().isdigit())


def foreign_contexts(
    reported: Iterable[int], candidate_tree: Iterable[int], ours: Iterable[int]
) -> tuple[list[int], list[int]]:
    """Split the pids ``reported`` with a context on the device into (the candidate sandbox's, when it holds
    more than the one of its worker: contexts the candidate started; those of processes outside this
    service, ``ours`` being every process of it: another tenant)."""
    tree, mine = set(candidate_tree), set(ours) | set(candidate_tree)
    in_tree = sorted(p for p in reported if p in tree)
    strangers = sorted(p for p in reported if p not in mine)
    return (in_tree if len(in_tree) > 1 else []), strangers


def busy_verdict(
    probe: BusyProbe, device: torch.device, candidate_tree: list[int], ours: list[int]
) -> str | None:
    """When ``probe`` found the device busy before the comparator calls: whose fault, as the text of the
    failure (``candidate: ...`` or ``environment: ...``); None when it was idle. Asks NVML only then."""
    if not probe.busy:
        return None
    reported = gpu_processes(device) or []
    started, strangers = foreign_contexts(reported, candidate_tree, ours)
    what = (
        f"the device was busy right before the comparator's calls (median probe {probe.median_ms:.3f} ms, "
        f"idle is under {BUSY_PROBE_MS} ms; {probe.stuck} call(s) found it still busy after {IDLE_WAIT_S:g} s)"
    )
    if strangers:
        return f"environment: {what}; processes outside this service hold a context on it: {strangers}"
    extra = f"; the candidate's sandbox holds {len(started)} contexts (pids {started})" if started else ""
    return (
        f"candidate: {what} while the candidate was paused and no other process uses the GPU: GPU work the "
        f"candidate left running after its reply slows what it is compared with{extra}"
    )
