"""L2 state a candidate could carry past the cold-L2 overwrite, and what the overwrite does about it (worker
side: both the candidate's worker and the twins run this before every timed call).

Two holes of an overwrite made of ordinary writes (``torch.Tensor.fill_``), each closed here:

- **Persisting L2 lines** (:func:`reset_persisting_l2`). Since Ampere a kernel can set aside part of L2 for
  *persisting* accesses (``cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes)``) and mark its inputs
  persisting with an access-policy window on its stream or launch; ordinary writes do not evict persisting
  lines, so the inputs would stay in L2 through the overwrite and the next call would run warm. Before every
  timed call the carve-out is set to 0 and every persisting line is reset to normal
  (``cudaCtxResetPersistingL2Cache``), and the carve-out is read back: a non-zero value refuses the call
  (the worker reports an error). After each call the carve-out the candidate left is read and reported
  (``persisting_l2_bytes``), so the result can say that it used one.
- **Side-stream work during the overwrite** (:class:`Gate`). A kernel the candidate launches on a stream of
  its own does not wait for the overwrite queued on the harness's stream; work that finishes before the
  overwrite ends is in neither timing bound (docs/gpu-results.md). The gate is the overwrite written as one
  Triton kernel that occupies every SM's warp slots (two programs of 32 warps per SM: an SM holds at most 64
  warps on Hopper) and keeps each program resident until ``hold_ms`` after it started, so no block of another
  kernel can start on any SM until the overwrite is over: side-stream work then starts at the start event and
  its time is in the upper bound. It needs Triton and a GPU; where it cannot be built (or its compiled form
  needs more than 32 registers a thread, so that two programs would not fit an SM) the plain overwrite is used
  and the reply says ``l2_gate: false``.

The CUDA runtime is reached through ctypes on the ``libcudart`` torch already loaded (torch has no binding for
these calls). Sources: CUDA C++ Programming Guide, "Device Memory L2 Access Management" (carve-out, access
policy windows, ``cudaCtxResetPersistingL2Cache``); Hopper tuning guide (64 resident warps per SM).
"""

from __future__ import annotations

import ctypes
import functools
import re
import time
from pathlib import Path
from typing import Any

import torch

LIMIT_PERSISTING_L2 = 0x06
"""``cudaLimitPersistingL2CacheSize`` in ``enum cudaLimit`` (cuda_runtime_api.h)."""
WARPS_PER_PROGRAM = 32
"""Warps of one gate program (1024 threads, the most a block may have)."""
RELEASE_CHECK_MS = 20.0
"""The wait of the release a new :class:`Gate` checks end to end (ms): a gate whose launch was not released
well inside it cannot be released, and never waits."""
GATE_KERNEL = "fibserve_l2_gate"
"""The gate kernel's name as CUDA, CUPTI and Nsight Systems show it (the Triton function's name in
:mod:`fibserve.bench.worker.l2_gate_kernel`): :mod:`fibserve.bench.worker.kernel_span` finds the call's work after it."""
MAX_GATE_REGISTERS = 32
"""Registers a thread of the gate may use so that two 32-warp programs fit an SM's 64K registers."""


class L2StateError(RuntimeError):
    """The persisting-L2 carve-out could not be cleared before a timed call."""


@functools.cache
def _cudart() -> Any:
    """The ``libcudart`` shared library this process loaded (through torch), or None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = sorted(set(re.findall(r"(/\S*libcudart\.so[.\d]*)\s*$", maps, re.M)))
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def persisting_l2_bytes(device: torch.device) -> int | None:
    """The current persisting-L2 carve-out of this process's context on ``device`` (bytes), None on CPU or
    when the runtime cannot be asked."""
    lib = _cudart() if device.type == "cuda" else None
    if lib is None:
        return None
    value = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(value), LIMIT_PERSISTING_L2) != 0:
        return None
    return int(value.value)


def reset_persisting_l2(device: torch.device) -> None:
    """Set the persisting-L2 carve-out to 0 and reset every persisting line to normal (see the module
    docstring). No-op on CPU or without a reachable runtime.

    Raises:
        L2StateError: the carve-out is not 0 afterwards.
    """
    lib = _cudart() if device.type == "cuda" else None
    if lib is None:
        return
    lib.cudaDeviceSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(0))
    lib.cudaCtxResetPersistingL2Cache()
    left = persisting_l2_bytes(device)
    if left:
        raise L2StateError(
            f"the persisting-L2 carve-out is {left} bytes after being set to 0 before a timed call"
        )


class Gate:
    """The gated overwrite of ``buffer`` (int32, on a CUDA device): see the module docstring.

    A launch may also *wait for release* (``wait_ms > 0``): after the hold its programs keep every SM until
    :meth:`release` is called with the launch's value (or ``wait_ms`` after they began). The caller queues the
    timed call behind the gate and then releases it, so the call runs from a full queue: no host launch
    latency, however slow the host was, is timed as GPU work. The release goes through a host-mapped pinned
    ``mailbox`` (``mailbox[0]``: the released value, written here; ``mailbox[1]``: the ns the gate waited
    after its hold, written by the GPU). ``releasable`` is False where that memory cannot be handed to the
    kernel, where a release made while the gate polls did not reach it within ``RELEASE_CHECK_MS / 2``, or where
    the gate does not fill every SM (:attr:`fills`); launches then never wait.

    Raises:
        RuntimeError: the gate cannot be built here (no Triton, or too many registers); callers fall back to
            the plain overwrite.
    """

    BLOCK = 1024

    def __init__(self, buffer: torch.Tensor, hold_ms: float):
        from fibserve.bench.worker.l2_gate_kernel import (
            fibserve_l2_gate,  # imports Triton: an ImportError tells the caller to fall back
        )

        self.buffer = buffer
        self.hold_ns = int(hold_ms * 1e6)
        props = torch.cuda.get_device_properties(buffer.device)
        self.programs = 2 * props.multi_processor_count
        per_sm = int(getattr(props, "max_threads_per_multi_processor", 0) or 0)
        self.fills = per_sm == 2 * WARPS_PER_PROGRAM * 32
        """Whether two programs take every warp slot of an SM (2048 threads: sm_80, sm_90, sm_100), so that no
        block of another kernel can start while the gate runs. Where not (1536-thread SMs), the gate does not
        wait for release and the caller keeps the bound that starts before the overwrite."""
        self.kernel = fibserve_l2_gate
        self.go = torch.zeros(1, dtype=torch.int32, device=buffer.device)
        self.releasable = self.fills
        try:
            self.mailbox = torch.zeros(2, dtype=torch.int64, pin_memory=True)
            self._mail = self.mailbox.numpy()
            compiled = self.launch(0)
            self.launch(1, RELEASE_CHECK_MS)  # one release end to end: the GPU must see the host's write
            time.sleep(0.001)  # made while the gate polls, not before it starts
            self.release(1)
            torch.cuda.synchronize(buffer.device)
            self.releasable = self.releasable and self.waited_ms() < RELEASE_CHECK_MS / 2
            self._mail[0] = -1  # no launch's value (they are non-negative): nothing is released ahead of time
            self.go.fill_(-1)
        except (
            Exception
        ):  # no pinned memory, or the kernel cannot be handed it: a device one, never waited on
            self.mailbox, self.releasable = torch.zeros(2, dtype=torch.int64, device=buffer.device), False
            compiled = self.launch(0)
        torch.cuda.synchronize(buffer.device)
        registers = getattr(compiled, "n_regs", None)
        if registers is None:
            registers = getattr(getattr(compiled, "metadata", None), "n_regs", None)
        if registers is not None and registers > MAX_GATE_REGISTERS:
            raise RuntimeError(
                f"the gate kernel needs {registers} registers a thread (at most {MAX_GATE_REGISTERS})"
            )

    def launch(self, value: int, wait_ms: float = 0.0) -> Any:
        """Overwrite the buffer with ``value`` and hold every SM until ``hold_ms`` after each program began,
        then, when ``wait_ms > 0`` (and the gate is releasable), until :meth:`release` of ``value`` or
        ``wait_ms`` after each program began; returns Triton's compiled kernel."""
        wait_ns = int(wait_ms * 1e6) if self.releasable else 0
        if wait_ns:
            self._mail[1] = 0
        return self.kernel[(self.programs,)](
            self.buffer,
            self.buffer.numel(),
            value,
            self.hold_ns,
            self.mailbox,
            self.go,
            wait_ns,
            BLOCK=self.BLOCK,
            num_warps=WARPS_PER_PROGRAM,
        )

    def mark(self) -> None:
        """Launch the gate kernel as a no-op (one program, nothing to write, no hold, no wait): the end mark a
        timed call leaves in CUPTI's records once it is done (:mod:`fibserve.bench.worker.kernel_span`)."""
        self.kernel[(1,)](
            self.buffer, 0, -2, 0, self.mailbox, self.go, 0, BLOCK=self.BLOCK, num_warps=WARPS_PER_PROGRAM
        )

    def release(self, value: int) -> None:
        """Let a launch of ``value`` that waits for release go (a write to host memory the GPU polls)."""
        if self.releasable:
            self._mail[0] = value

    def waited_ms(self) -> float:
        """How long (ms) the last launch that waited for release held the SMs after its hold: the host's time
        to queue the timed call behind it (read once the launch has finished; its own report, like every
        time a worker sends)."""
        return float(self._mail[1]) / 1e6 if self.releasable else 0.0


def warm_gate(device: torch.device, hold_ms: float = 0.0) -> bool:
    """Build the gate kernel now (a worker does it while it starts, off the critical path), on a small buffer with
    the same specialization as the cold-L2 buffer; False when no gate can be built here. Into an empty Triton
    cache this took 1.39 to 1.93 s on the H100; a worker's cache is private, and starts as a copy of the zygote's
    build (:mod:`fibserve.bench.worker.gate_seed`), which left 0.17 s (docs/gpu-results.md, thirteenth session)."""
    if device.type != "cuda":
        return False
    try:
        Gate(torch.empty(1 << 14, dtype=torch.int32, device=device), hold_ms)
    except Exception:
        return False
    return True
