"""CUPTI's activity API through ctypes: the kernels, copies and memsets this process ran, timestamped on the GPU
(UNTRUSTED side: the worker; imported only with spans asked for).

Why not ``torch.profiler`` (libkineto), which drove the spans first: its first start in a process took 5.1 to
7.1 s on the H100 machine, every GPU worker paying it as it started, where CUPTI's own
``cuptiActivityEnable`` took 13 ms and a flush 0.5 ms (docs/gpu-results.md, thirteenth session).

:class:`Activities` registers two callbacks with CUPTI (``cuptiActivityRegisterCallbacks``): one hands CUPTI a
buffer from a pool made once (:data:`POOL_BUFFERS` of :data:`BUFFER_BYTES`; none when all are out, so a candidate
launching without end cannot grow this process: CUPTI drops what it cannot store, and a recording that dropped any
record gives no spans), the other decodes each filled buffer (``cuptiActivityGetNextRecord``) and returns it to the
pool. The callbacks are Python: CUPTI's own worker thread delivers a buffer that fills during a recording, and
takes the GIL to do it while the worker's thread may hold the GIL and wait on CUPTI to launch (PyTorch met this
deadlock in its own CUPTI client). A trial's recording is flushed from the worker's thread when the trusted side
asks for its spans. A kernel record is 216 bytes (``CUpti_ActivityKernel10``), so a trial of 60 calls of a dozen
kernels each, gate kernels included, fills about 160 kB of a 4 MiB buffer: only a candidate that launches some
19,000 kernels in one trial reaches that path, and then at the risk of its own worker.

It records three kinds: ``CONCURRENT_KERNEL`` (10; kernels run concurrently, unlike ``KERNEL``, which serialises
them), ``MEMCPY`` (1) and ``MEMSET`` (2). Every record of the three starts with ``uint32 kind`` and has ``uint64
start`` and ``uint64 end`` (ns) at bytes 16 and 24; a kernel record's ``const char *name`` is at byte 104
(``CUpti_ActivityKernel4`` to ``CUpti_ActivityKernel10``, ``CUpti_ActivityMemcpy6``, ``CUpti_ActivityMemset4`` of
CUPTI's cupti_activity.h, CUDA 12 and 13; tests/fibserve/bench/test_cupti_records.py checks them against the
header Triton ships). A record that does not read sensibly (a zero timestamp, which CUPTI leaves where it could
not take one, an end before its start, a kernel without a readable name) counts as dropped, so a wrong layout
gives no spans rather than wrong ones. Names are read through ``/proc/self/mem``, where an address that is not
mapped is an error rather than a crash.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import sys
import threading
from collections.abc import Callable, Sequence

KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_CONCURRENT_KERNEL = 10
KINDS = (KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET)
"""The activity kinds recorded (``CUpti_ActivityKind``)."""

START_OFFSET, END_OFFSET, NAME_OFFSET = 16, 24, 104
"""Byte offsets in an activity record: start and end (ns) in all three kinds, a kernel's name pointer."""

BUFFER_BYTES = 4 << 20
POOL_BUFFERS = 4
"""The buffer pool: made once, 16 MiB; a request when every buffer is out gets none (CUPTI drops the records)."""

NAME_CHUNK = 4096
MAX_NAME_BYTES = 1 << 16
"""A kernel name is read in chunks up to its NUL, at most this long (longer: unreadable)."""

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


def decode(address: int, read_name: Callable[[int], str]) -> Record | None:
    """The activity record at ``address`` as ``(name, start_ns, end_ns)``, a kernel's name read by ``read_name``
    from its pointer; None for another kind.

    Raises:
        ValueError: the record does not read sensibly (see the module docstring).
    """
    kind = ctypes.c_uint32.from_address(address).value
    if kind not in KINDS:
        return None
    start = ctypes.c_uint64.from_address(address + START_OFFSET).value
    end = ctypes.c_uint64.from_address(address + END_OFFSET).value
    if start == 0 or end == 0 or end < start:
        raise ValueError(f"activity record with timestamps {start}, {end}")
    if kind == KIND_CONCURRENT_KERNEL:
        pointer = ctypes.c_void_p.from_address(address + NAME_OFFSET).value
        if not pointer:
            raise ValueError("kernel record without a name")
        return read_name(pointer), start, end
    return ("memcpy" if kind == KIND_MEMCPY else "memset"), start, end


def read_c_string(memory: int, pointer: int) -> str:
    """The NUL-terminated string at ``pointer`` of this process, read from ``memory`` (an open ``/proc/self/mem``).

    Raises:
        ValueError: the address is not mapped, or no NUL within :data:`MAX_NAME_BYTES`.
    """
    data = b""
    while len(data) < MAX_NAME_BYTES:
        at = pointer + len(data)
        want = NAME_CHUNK - at % NAME_CHUNK  # to the page's end: the next page may not be mapped
        try:
            chunk = os.pread(memory, want, at)
        except OSError as exc:
            raise ValueError(f"kernel name at {pointer:#x} not readable: {exc}") from None
        if not chunk:
            raise ValueError(f"kernel name at {pointer:#x} not readable")
        end = chunk.find(b"\0")
        if end >= 0 and len(data) + end <= MAX_NAME_BYTES:
            return (data + chunk[:end]).decode("utf-8", "replace")
        data += chunk
    raise ValueError(f"kernel name at {pointer:#x} longer than {MAX_NAME_BYTES} bytes")


def library_paths() -> list[str]:
    """Where a ``libcupti`` may be: a copy this process has mapped already (two copies would fight over CUPTI's
    callbacks), the names in :data:`LIBRARY_NAMES`, then the NVIDIA wheels' directories on ``sys.path``
    (``nvidia/*/lib``, as torch's CUDA wheels install it)."""
    loaded = []
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip() if line.count(" ") >= 5 else ""
            if os.path.basename(path).startswith("libcupti.so") and path not in loaded:
                loaded.append(path)
    found = [
        path
        for entry in sys.path
        if entry
        for pattern in ("nvidia/*/lib/libcupti.so*", "nvidia/*/*/lib/libcupti.so*")
        for path in sorted(glob.glob(os.path.join(entry, pattern)))
    ]
    return [*loaded, *LIBRARY_NAMES, *found]


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
        self._pool = [ctypes.create_string_buffer(BUFFER_BYTES + 8) for _ in range(POOL_BUFFERS)]
        self._free = [(ctypes.addressof(raw) + 7) & ~7 for raw in self._pool]  # records are 8-byte aligned
        """Pool buffers not held by CUPTI (aligned addresses)."""
        self._own = frozenset(self._free)
        try:
            self._memory = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise CuptiUnavailable(f"cannot read kernel names from /proc/self/mem: {exc}") from None
        self._records: list[Record] = []
        self.dropped = 0
        """Records lost since the last :meth:`collect`: no buffer given, CUPTI's own count, or unreadable."""
        self._request_cb, self._complete_cb = _REQUEST(self._request), _COMPLETE(self._complete)
        result = self._lib.cuptiActivityRegisterCallbacks(self._request_cb, self._complete_cb)
        if result != 0:
            raise CuptiUnavailable(f"cuptiActivityRegisterCallbacks returned {result}")

    def _request(self, buffer, size, max_records) -> None:  # called by CUPTI, on any thread
        with self._lock:
            address = self._free.pop() if self._free else None
        buffer[0], size[0], max_records[0] = address, BUFFER_BYTES if address else 0, 0

    def _complete(self, context, stream_id, buffer, size, valid) -> None:  # called by CUPTI, on any thread
        records, dropped, names = [], 0, {}

        def read_name(
            pointer: int,
        ) -> str:  # one read per kernel: CUPTI shares a kernel's name between records
            if pointer not in names:
                names[pointer] = read_c_string(self._memory, pointer)
            return names[pointer]

        try:
            record = ctypes.c_void_p()
            while (
                self._lib.cuptiActivityGetNextRecord(buffer, valid, ctypes.byref(record)) == 0
                and record.value
            ):
                try:
                    decoded = decode(record.value, read_name)
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
            if buffer in self._own and buffer not in self._free:
                self._free.append(buffer)
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
_REFUSED: CuptiUnavailable | None = None
_ACTIVITIES_LOCK = threading.Lock()


def activities() -> Activities:
    """This process's :class:`Activities`, made on first use.

    Raises:
        CuptiUnavailable: as :class:`Activities`; a later call raises the same at once, without trying again.
    """
    global _ACTIVITIES, _REFUSED
    with _ACTIVITIES_LOCK:
        if _REFUSED is not None:
            raise _REFUSED
        if _ACTIVITIES is None:
            try:
                _ACTIVITIES = Activities()
            except CuptiUnavailable as exc:
                _REFUSED = exc
                raise
        return _ACTIVITIES
