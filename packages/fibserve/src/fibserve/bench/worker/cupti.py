"""CUPTI's activity API through ctypes: the kernels, copies and memsets this process ran, timestamped on the GPU
(UNTRUSTED side: the worker; imported only with spans asked for).

Why not ``torch.profiler`` (libkineto), which drove the spans first: its first start in a process took 5.1 to
7.1 s on the H100 machine, every GPU worker paying it as it started, where CUPTI's own
``cuptiActivityEnable`` took 13 ms and a flush 0.5 ms (docs/gpu-results.md, thirteenth session).

:class:`Activities` registers two callbacks with CUPTI (``cuptiActivityRegisterCallbacks``): one hands CUPTI
1 MiB buffers (at most :data:`MAX_BUFFERS` at a time, so a candidate launching without end cannot grow this
process: records beyond are dropped, and a recording that dropped any is reported as such), the other decodes
each filled buffer (``cuptiActivityGetNextRecord``). It records three kinds: ``CONCURRENT_KERNEL`` (10; kernels
run concurrently, unlike ``KERNEL``, which serialises them), ``MEMCPY`` (1) and ``MEMSET`` (2). Every record of
the three starts with ``uint32 kind`` and has ``uint64 start`` and ``uint64 end`` (ns) at bytes 16 and 24; a
kernel record's ``const char *name`` is at byte 104 (``CUpti_ActivityKernel4`` to ``CUpti_ActivityKernel9``,
CUPTI's cupti_activity.h). A record that does not read sensibly (an end before its start, a kernel without a
name) counts as dropped, so a wrong layout gives no spans rather than wrong ones.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import sys
import threading
from collections.abc import Sequence

KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_CONCURRENT_KERNEL = 10
KINDS = (KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET)
"""The activity kinds recorded (``CUpti_ActivityKind``)."""

START_OFFSET, END_OFFSET, NAME_OFFSET = 16, 24, 104
"""Byte offsets in an activity record: start and end (ns) in all three kinds, a kernel's name pointer."""

BUFFER_BYTES = 1 << 20
MAX_BUFFERS = 64
"""Buffers handed to CUPTI and not yet returned, at most (64 MiB); further requests get none (records dropped)."""

FLUSH_FORCED = 1
"""``CUPTI_ACTIVITY_FLAG_FLUSH_FORCED``: flush buffers that are not full too."""

LIBRARY_NAMES = ("libcupti.so.13", "libcupti.so.12", "libcupti.so")
"""Tried first by name: the copy the CUDA wheels' loader already mapped, if any, is the one to use."""

Record = tuple[str, int, int]
"""One activity: ``(name, start_ns, end_ns)``; copies are named ``memcpy``, memsets ``memset``."""

_REQUEST = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
_COMPLETE = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)


class CuptiUnavailable(RuntimeError):
    """CUPTI could not be loaded or would not record (no library, another profiler holds it)."""


def decode(address: int) -> Record | None:
    """The activity record at ``address`` as ``(name, start_ns, end_ns)``; None for another kind, or one that does
    not read sensibly (see the module docstring)."""
    kind = ctypes.c_uint32.from_address(address).value
    if kind not in KINDS:
        return None
    start = ctypes.c_uint64.from_address(address + START_OFFSET).value
    end = ctypes.c_uint64.from_address(address + END_OFFSET).value
    if end < start:
        raise ValueError("activity record ends before it starts")
    if kind == KIND_CONCURRENT_KERNEL:
        raw = ctypes.c_char_p.from_address(address + NAME_OFFSET).value
        if not raw:
            raise ValueError("kernel record without a name")
        name = raw.decode("utf-8", "replace")
    else:
        name = "memcpy" if kind == KIND_MEMCPY else "memset"
    return name, start, end


def library_paths() -> list[str]:
    """Where a ``libcupti`` may be: the names in :data:`LIBRARY_NAMES`, then the NVIDIA wheels' directories on
    ``sys.path`` (``nvidia/*/lib``, as torch's CUDA wheels install it)."""
    found = [
        path
        for entry in sys.path
        if entry
        for pattern in ("nvidia/*/lib/libcupti.so*", "nvidia/*/*/lib/libcupti.so*")
        for path in sorted(glob.glob(os.path.join(entry, pattern)))
    ]
    return [*LIBRARY_NAMES, *found]


def _declare(lib: ctypes.CDLL) -> None:
    """The argument types of the CUPTI functions used (pointers must not pass as C ints)."""
    result = ctypes.c_int
    for name, args in {
        "cuptiActivityRegisterCallbacks": [_REQUEST, _COMPLETE],
        "cuptiActivityEnable": [ctypes.c_int],
        "cuptiActivityDisable": [ctypes.c_int],
        "cuptiActivityFlushAll": [ctypes.c_uint32],
        "cuptiActivityGetNextRecord": [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)],
        "cuptiActivityGetNumDroppedRecords": [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_size_t),
        ],
    }.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = args, result


class Activities:
    """This process's CUPTI activity recording: :meth:`enable`, run GPU work, :meth:`collect` (disables).

    One per process (CUPTI's callbacks are global): use :func:`activities`. Thread-safe.

    Raises:
        CuptiUnavailable: from the constructor, where no CUPTI library loads or its callbacks cannot be
            registered.
    """

    def __init__(self, paths: Sequence[str] | None = None):
        self._lib: ctypes.CDLL | None = None
        for path in paths if paths is not None else library_paths():
            with contextlib.suppress(OSError):
                self._lib = ctypes.CDLL(path)
                break
        if self._lib is None:
            raise CuptiUnavailable("no CUPTI library could be loaded")
        try:
            _declare(self._lib)
        except AttributeError as exc:
            raise CuptiUnavailable(f"the CUPTI library lacks {exc}") from None
        self._lock = threading.Lock()
        self._buffers: dict[int, ctypes.Array] = {}
        self._records: list[Record] = []
        self.dropped = 0
        """Records lost since the last :meth:`collect`: no buffer given, CUPTI's own count, or unreadable."""
        self._request_cb, self._complete_cb = _REQUEST(self._request), _COMPLETE(self._complete)
        result = self._lib.cuptiActivityRegisterCallbacks(self._request_cb, self._complete_cb)
        if result != 0:
            raise CuptiUnavailable(f"cuptiActivityRegisterCallbacks returned {result}")

    def _request(self, buffer, size, max_records) -> None:  # called by CUPTI, on any thread
        try:
            with self._lock:
                if len(self._buffers) >= MAX_BUFFERS:
                    buffer[0], size[0], max_records[0] = None, 0, 0
                    return
                raw = ctypes.create_string_buffer(BUFFER_BYTES + 8)
                address = (ctypes.addressof(raw) + 7) & ~7  # records are 8-byte aligned
                self._buffers[address] = raw
            buffer[0], size[0], max_records[0] = address, BUFFER_BYTES, 0
        except Exception:
            buffer[0], size[0], max_records[0] = None, 0, 0

    def _complete(self, context, stream_id, buffer, size, valid) -> None:  # called by CUPTI, on any thread
        records, dropped = [], 0
        try:
            record = ctypes.c_void_p()
            while (
                self._lib.cuptiActivityGetNextRecord(buffer, valid, ctypes.byref(record)) == 0
                and record.value
            ):
                try:
                    decoded = decode(record.value)
                except ValueError:
                    dropped += 1
                    continue
                if decoded is not None:
                    records.append(decoded)
            lost = ctypes.c_size_t(0)
            if self._lib.cuptiActivityGetNumDroppedRecords(context, stream_id, ctypes.byref(lost)) == 0:
                dropped += lost.value
        except Exception:
            dropped += 1
        with self._lock:
            self._buffers.pop(buffer, None)
            self._records.extend(records)
            self.dropped += dropped

    def enable(self) -> None:
        """Start recording (clears what an earlier recording left).

        Raises:
            CuptiUnavailable: CUPTI refused a kind (another subscriber, or a tool, holds it).
        """
        with self._lock:
            self._records, self.dropped = [], 0
        for kind in KINDS:
            result = self._lib.cuptiActivityEnable(kind)
            if result != 0:
                self._disable()
                raise CuptiUnavailable(f"cuptiActivityEnable({kind}) returned {result}")

    def _disable(self) -> None:
        for kind in KINDS:
            self._lib.cuptiActivityDisable(kind)

    def collect(self) -> tuple[list[Record], int]:
        """Stop recording and return every record since :meth:`enable` with the number lost (the GPU work must
        have finished: synchronize first)."""
        self._disable()
        self._lib.cuptiActivityFlushAll(FLUSH_FORCED)
        with self._lock:
            records, dropped = self._records, self.dropped
            self._records, self.dropped = [], 0
        return records, dropped


_ACTIVITIES: Activities | None = None
_ACTIVITIES_LOCK = threading.Lock()


def activities() -> Activities:
    """This process's :class:`Activities`, made on first use.

    Raises:
        CuptiUnavailable: as :class:`Activities` (and again on every later call).
    """
    global _ACTIVITIES
    with _ACTIVITIES_LOCK:
        if _ACTIVITIES is None:
            _ACTIVITIES = Activities()
        return _ACTIVITIES
