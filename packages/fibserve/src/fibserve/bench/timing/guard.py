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
  trusted process times a one-element kernel on its own stream (CUDA events). On an idle device it takes a
  few microseconds; work of another context (GPU work the candidate queued before its reply, on any stream)
  makes it wait for a time slice. A median probe above ``BUSY_PROBE_MS`` over a workload's comparator calls
  means the twin was timed on a busy device: the candidate's fault (RUNTIME_ERROR) when no other process
  holds a context on the GPU, the environment's (a harness error) when one does.
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
from collections.abc import Iterable, Iterator

import torch

from fibserve.bench.device import device_uuid, nvml_handle
from fibserve.bench.timing import statistics as stats
from fibserve.sandbox.watchdog import tree_pids

BUSY_PROBE_MS = 0.2
"""Median time (ms) of the one-element probe kernel before the comparator calls of one workload above which
the device counts as busy with another context's work. Not yet calibrated on a GPU: an idle H200 is expected
at a few microseconds (launch and event resolution), a time slice of another context at milliseconds."""


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


class BusyProbe:
    """The trusted process's one-element probe kernel on ``device`` (see the module docstring); no-op on CPU.

    ``measure()`` times one probe (ms, CUDA events, on a private stream of the trusted process) and keeps it;
    ``median_ms`` is the median of those kept (0.0 when none)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.samples: list[float] = []
        self._cuda = device.type == "cuda"
        if self._cuda:
            self._stream = torch.cuda.Stream(device)
            self._cell = torch.zeros(1, device=device)

    def measure(self) -> float:
        """Time one probe kernel; 0.0 on CPU."""
        if not self._cuda:
            return 0.0
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self._stream):
            begin.record(self._stream)
            self._cell.add_(1.0)
            end.record(self._stream)
        end.synchronize()
        ms = float(begin.elapsed_time(end))
        self.samples.append(ms)
        return ms

    @property
    def median_ms(self) -> float:
        """Median of the probes timed so far (ms; 0.0 when none)."""
        return stats.percentile(sorted(self.samples), 50) if self.samples else 0.0

    @property
    def busy(self) -> bool:
        """Whether the median probe exceeds ``BUSY_PROBE_MS``."""
        return self.median_ms > BUSY_PROBE_MS


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
        f"idle is under {BUSY_PROBE_MS} ms)"
    )
    if strangers:
        return f"environment: {what}; processes outside this service hold a context on it: {strangers}"
    extra = f"; the candidate's sandbox holds {len(started)} contexts (pids {started})" if started else ""
    return (
        f"candidate: {what} while the candidate was paused and no other process uses the GPU: GPU work the "
        f"candidate left running after its reply slows what it is compared with{extra}"
    )
