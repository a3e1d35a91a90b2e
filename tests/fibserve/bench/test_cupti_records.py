"""CUPTI's activity records read through ctypes (:mod:`fibserve.bench.worker.cupti`), CPU only: records laid out
here as CUPTI lays them out, and a stand-in for the library's record iterator. On a GPU the spans it gives are
checked against torch.profiler's (tests/fibserve/bench/test_gpu_release.py, benchmarks/short_kernels.py)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from fibserve.bench.worker import cupti
from fibserve.bench.worker.kernel_span import SpanRecording

GATE = "fibserve_l2_gate"


def _record(kind: int, start: int, end: int, name: bytes | None = None) -> tuple[ctypes.Array, list]:
    """A 160-byte activity record; the buffers it points to are returned too (kept alive by the caller)."""
    raw = ctypes.create_string_buffer(160)
    ctypes.c_uint32.from_buffer(raw, 0).value = kind
    ctypes.c_uint64.from_buffer(raw, cupti.START_OFFSET).value = start
    ctypes.c_uint64.from_buffer(raw, cupti.END_OFFSET).value = end
    kept = []
    if name is not None:
        text = ctypes.create_string_buffer(name)
        kept.append(text)
        ctypes.c_void_p.from_buffer(raw, cupti.NAME_OFFSET).value = ctypes.addressof(text)
    return raw, kept


def test_kernels_copies_and_memsets_read_as_named_spans_and_other_kinds_are_skipped() -> None:
    kernel, kept = _record(cupti.KIND_CONCURRENT_KERNEL, 1_000, 3_250, GATE.encode())
    copy, _ = _record(cupti.KIND_MEMCPY, 4_000, 4_500)
    memset, _ = _record(cupti.KIND_MEMSET, 5_000, 5_010)
    other, _ = _record(30, 1, 2)  # SYNCHRONIZATION: not recorded
    assert cupti.decode(ctypes.addressof(kernel), _read_name) == (GATE, 1_000, 3_250)
    assert cupti.decode(ctypes.addressof(copy), _read_name) == ("memcpy", 4_000, 4_500)
    assert cupti.decode(ctypes.addressof(memset), _read_name) == ("memset", 5_000, 5_010)
    assert cupti.decode(ctypes.addressof(other), _read_name) is None
    assert kept


@pytest.mark.parametrize(
    "record",
    [
        (cupti.KIND_CONCURRENT_KERNEL, 10, 5, b"k"),  # ends before it starts
        (cupti.KIND_CONCURRENT_KERNEL, 10, 20, None),  # a kernel without a name
        (cupti.KIND_MEMCPY, 10, 5, None),
        (cupti.KIND_CONCURRENT_KERNEL, 0, 0, b"k"),  # CUPTI could not take its timestamps (not finished)
        (cupti.KIND_MEMSET, 10, 0, None),
    ],
    ids=["backwards kernel", "nameless kernel", "backwards copy", "unfinished kernel", "unfinished memset"],
)
def test_a_record_that_does_not_read_sensibly_is_refused(record) -> None:
    raw, _kept = _record(*record)
    with pytest.raises(ValueError):
        cupti.decode(ctypes.addressof(raw), _read_name)


def _read_name(pointer: int) -> str:
    with open("/proc/self/mem", "rb", buffering=0) as memory:
        return cupti.read_c_string(memory.fileno(), pointer)


def test_a_name_is_read_to_its_nul_across_pages_and_an_unmapped_address_is_an_error_not_a_crash() -> None:
    long_name = b"_Z" + b"x" * (3 * cupti.NAME_CHUNK) + b"\0tail"
    text = ctypes.create_string_buffer(long_name)
    assert _read_name(ctypes.addressof(text)) == long_name.split(b"\0")[0].decode()
    with pytest.raises(ValueError, match="not readable"):
        _read_name(0x10)  # the zero page is never mapped
    endless = ctypes.create_string_buffer(b"y" * (cupti.MAX_NAME_BYTES + 10))
    with pytest.raises(ValueError, match="longer than"):
        _read_name(ctypes.addressof(endless))


class _Library:
    """Stands in for libcupti's record iterator over a list of record addresses, and its dropped count."""

    def __init__(self, addresses: list[int], dropped: int = 0):
        self.addresses, self.dropped = addresses, dropped

    def cuptiActivityGetNextRecord(self, buffer, valid, record_ref) -> int:
        record = record_ref._obj
        if not self.addresses:
            return 1  # CUPTI_ERROR_MAX_LIMIT_REACHED
        record.value = self.addresses.pop(0)
        return 0

    def cuptiActivityGetNumDroppedRecords(self, context, stream, count_ref) -> int:
        count_ref._obj.value = self.dropped
        return 0

    def cuptiActivityDisable(self, kind) -> int:
        return 0

    def cuptiActivityFlushAll(self, flags) -> int:
        return 0


def _activities(library: _Library) -> cupti.Activities:
    activities = object.__new__(cupti.Activities)  # no libcupti here: the constructor would refuse
    activities._lib = library
    activities._lock = threading.Lock()
    activities._pool = [ctypes.create_string_buffer(64) for _ in range(cupti.POOL_BUFFERS)]
    activities._free = [(ctypes.addressof(raw) + 7) & ~7 for raw in activities._pool]
    activities._own = frozenset(activities._free)
    activities._memory = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
    activities._records, activities.dropped = [], 0
    return activities


def test_a_filled_buffer_gives_its_records_and_counts_what_was_lost() -> None:
    good, kept = _record(cupti.KIND_CONCURRENT_KERNEL, 100, 200, b"work")
    bad, _ = _record(cupti.KIND_CONCURRENT_KERNEL, 300, 200, b"work")
    activities = _activities(_Library([ctypes.addressof(good), ctypes.addressof(bad)], dropped=2))
    activities._complete(None, 7, activities._free[0], 1 << 20, 320)
    records, lost = activities.collect()
    assert records == [("work", 100, 200)] and lost == 3  # the unreadable record and CUPTI's own two
    assert activities.collect() == ([], 0)  # collected once
    assert kept


def test_cupti_gets_buffers_from_the_pool_only_and_each_returns_to_it() -> None:
    activities = _activities(_Library([]))
    buffer, size, count = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    handed = []
    for _ in range(cupti.POOL_BUFFERS):
        activities._request(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
        assert buffer.value in activities._own and buffer.value % 8 == 0 and size.value == cupti.BUFFER_BYTES
        handed.append(buffer.value)
    assert len(set(handed)) == cupti.POOL_BUFFERS
    activities._request(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
    assert not buffer.value and size.value == 0  # CUPTI drops what it cannot store, and says so in its count
    activities._complete(None, 0, handed[0], cupti.BUFFER_BYTES, 0)  # a returned buffer is handed out again
    activities._complete(
        None, 0, 12345, cupti.BUFFER_BYTES, 0
    )  # a buffer that is not the pool's is not taken
    activities._request(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
    assert buffer.value == handed[0] and activities._free == []


def test_no_library_is_a_clear_refusal() -> None:
    with pytest.raises(cupti.CuptiUnavailable, match="no CUPTI library"):
        cupti.Activities(paths=["/nonexistent/libcupti.so"])


class _Recorded:
    def __init__(self, records, lost):
        self.result = (records, lost)

    def enable(self) -> None:
        pass

    def collect(self):
        return self.result


@pytest.mark.parametrize("lost", [0, 1])
def test_a_recording_that_lost_any_record_has_no_spans(monkeypatch: pytest.MonkeyPatch, lost: int) -> None:
    records = [(GATE, 0, 1_000), ("add", 2_000, 3_410), (GATE, 9_000, 9_500)]
    monkeypatch.setattr(cupti, "activities", lambda: _Recorded(records, lost))
    recording = SpanRecording()
    recording.start(1)
    recording.add(1)
    expected = [None] if lost else [pytest.approx(0.00141, abs=1e-9)]
    assert recording.finish(GATE) == expected


def _header_dirs() -> list:
    """Directories holding a cupti_activity.h: the one Triton ships, and a CUDA toolkit's, where present."""
    import triton

    dirs = {
        "triton's": Path(triton.__file__).parent / "backends" / "nvidia" / "include",
        "the CUDA toolkit's": Path("/usr/local/cuda/include"),
    }
    return [pytest.param(d, id=name) for name, d in dirs.items() if (d / "cupti_activity.h").is_file()]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("include", _header_dirs())
def test_the_offsets_read_are_cuptis_own_in_the_newest_records_its_header_declares(
    include: Path, tmp_path: Path
) -> None:
    header = (include / "cupti_activity.h").read_text(errors="replace")

    def newest(kind: str) -> str:
        versions = [int(v) for v in re.findall(rf"}}\s*CUpti_Activity{kind}(\d+)\s*;", header)]
        return f"CUpti_Activity{kind}{max(versions)}"

    kernel, memcpy, memset = newest("Kernel"), newest("Memcpy"), newest("Memset")
    source = tmp_path / "offsets.c"
    source.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include <cupti_activity.h>\n"
        f'int main(void) {{ printf("%zu %zu %zu %zu %zu %zu %zu\\n", offsetof({kernel}, start), '
        f"offsetof({kernel}, end), offsetof({kernel}, name), offsetof({memcpy}, start), offsetof({memcpy}, end), "
        f"offsetof({memset}, start), offsetof({memset}, end)); return 0; }}\n"
    )
    binary = tmp_path / "offsets"
    subprocess.run(
        ["gcc", "-I", str(include), str(source), "-o", str(binary)], check=True, capture_output=True
    )
    printed = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split()
    start, end, name = cupti.START_OFFSET, cupti.END_OFFSET, cupti.NAME_OFFSET
    assert [int(n) for n in printed] == [start, end, name, start, end, start, end], (kernel, memcpy, memset)
