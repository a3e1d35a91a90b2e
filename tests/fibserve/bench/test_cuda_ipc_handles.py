"""A worker's CUDA IPC handle is checked before the driver sees it, and nothing else of the reply is used.

The trusted side used to open handles with torch's ``rebuild_cuda_tensor``, passing on the worker's
reference-counter file name and offset and its claimed allocation size: torch then mapped that file from the
host's ``/dev/shm`` and, on release, decremented an ``int64`` at the worker's offset in it. The replacement
(:mod:`fibserve.bench.worker.cuda_ipc`) takes only the 64-byte handle and an offset, refuses anything else before a
driver call, and asks the driver for the allocation's size (the GPU tests open real handles). These run without
a GPU: every refusal here happens before ``libcuda`` is loaded.
"""

from __future__ import annotations

import base64

import pytest
import torch
from fibserve.bench.worker import cuda_ipc
from fibserve.bench.worker.buffers import BufferError, open_cuda_buffer
from fibserve.bench.worker.cuda_ipc import CudaIpcError, open_handle

CUDA = torch.device("cuda", 0)
SPEC = {"shape": [4, 8], "dtype": "bfloat16", "nbytes": 64}
GOOD = base64.b64encode(b"h" * 64).decode()


@pytest.fixture
def no_driver(monkeypatch):
    """Fail the test if any check below lets a handle reach the CUDA driver."""

    def reached() -> None:
        raise AssertionError("a malformed handle reached the CUDA driver")

    monkeypatch.setattr(cuda_ipc, "_driver", reached)


@pytest.mark.parametrize(
    ("handle", "offset", "problem"),
    [
        (None, 0, "malformed"),
        (GOOD, "0", "malformed"),
        (GOOD, True, "malformed"),
        ("not base64!", 0, "not base64"),
        (base64.b64encode(b"h" * 63).decode(), 0, "63 bytes"),
        (GOOD, -2, "offset -2"),
        (GOOD, 3, "offset 3"),  # a bfloat16 buffer cannot start at an odd byte
    ],
)
def test_a_malformed_handle_is_refused_before_the_driver(no_driver, handle, offset, problem) -> None:
    with pytest.raises(CudaIpcError, match=problem):
        open_handle(handle, offset, 64, torch.bfloat16, CUDA)


def test_a_reply_that_is_not_a_cuda_handle_is_refused(no_driver) -> None:
    with pytest.raises(BufferError, match="'fd' for a CUDA buffer"):
        open_cuda_buffer({"kind": "fd"}, SPEC, CUDA)


def test_a_handle_with_zero_bytes_keeps_all_64() -> None:
    """The driver's handles hold zero bytes; read as a C string the handle was cut at the first one, and every
    CUDA IPC exchange of the first GPU run failed ("malformed CUDA IPC handle (4 bytes, offset 0)")."""
    raw = bytes([7, 7, 7, 7, 0, 0, 9]) + bytes(range(57))
    handle = cuda_ipc._Handle.decoded(raw)
    assert base64.b64decode(handle.encoded()) == raw
