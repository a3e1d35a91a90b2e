"""CUPTI's activity records read through ctypes (:mod:`fibserve.bench.worker.cupti`), CPU only: records laid out
here as CUPTI lays them out, and a stand-in for the library's record iterator. On a GPU the spans it gives are
checked against torch.profiler's (tests/fibserve/bench/test_gpu_release.py, benchmarks/short_kernels.py)."""

from __future__ import annotations

import ctypes
import threading

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
    assert cupti.decode(ctypes.addressof(kernel)) == (GATE, 1_000, 3_250)
    assert cupti.decode(ctypes.addressof(copy)) == ("memcpy", 4_000, 4_500)
    assert cupti.decode(ctypes.addressof(memset)) == ("memset", 5_000, 5_010)
    assert cupti.decode(ctypes.addressof(other)) is None
    assert kept


@pytest.mark.parametrize(
    "record",
    [
        (cupti.KIND_CONCURRENT_KERNEL, 10, 5, b"k"),  # ends before it starts
        (cupti.KIND_CONCURRENT_KERNEL, 10, 20, None),  # a kernel without a name
        (cupti.KIND_MEMCPY, 10, 5, None),
    ],
    ids=["backwards kernel", "nameless kernel", "backwards copy"],
)
def test_a_record_that_does_not_read_sensibly_is_refused(record) -> None:
    raw, _kept = _record(*record)
    with pytest.raises(ValueError):
        cupti.decode(ctypes.addressof(raw))


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
    activities._buffers, activities._records, activities.dropped = {}, [], 0
    return activities


def test_a_filled_buffer_gives_its_records_and_counts_what_was_lost() -> None:
    good, kept = _record(cupti.KIND_CONCURRENT_KERNEL, 100, 200, b"work")
    bad, _ = _record(cupti.KIND_CONCURRENT_KERNEL, 300, 200, b"work")
    activities = _activities(_Library([ctypes.addressof(good), ctypes.addressof(bad)], dropped=2))
    activities._complete(None, 7, 0, 1 << 20, 320)
    records, lost = activities.collect()
    assert records == [("work", 100, 200)] and lost == 3  # the unreadable record and CUPTI's own two
    assert activities.collect() == ([], 0)  # collected once
    assert kept


def test_cupti_gets_no_more_buffers_than_the_cap() -> None:
    activities = _activities(_Library([]))
    buffer, size, count = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    for _ in range(cupti.MAX_BUFFERS):
        activities._request(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
        assert buffer.value and buffer.value % 8 == 0 and size.value == cupti.BUFFER_BYTES
    activities._request(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
    assert not buffer.value and size.value == 0  # CUPTI drops what it cannot store, and says so in its count
    first = next(iter(activities._buffers))
    activities._complete(None, 0, first, cupti.BUFFER_BYTES, 0)  # a returned buffer makes room for one more
    activities._request(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(count))
    assert buffer.value and len(activities._buffers) == cupti.MAX_BUFFERS


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
