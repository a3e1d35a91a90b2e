"""The CUDA IPC handle a worker sends is opened with exactly the argument types torch's ``_new_shared_cuda``
accepts (bytes for every handle, a bool for the event flag), and no worker IPC event is ever opened.

CUDA IPC needs a GPU, so here ``rebuild_cuda_tensor`` is replaced by a stand-in that applies torch's argument
checks (torch/csrc/StorageSharing.cpp) and records what it was given; the GPU tests open real handles. This
is the check that would have caught passing ``None`` as the event handle, which failed every GPU evaluation.
"""

from __future__ import annotations

import base64

import pytest
import torch
import torch.multiprocessing.reductions as reductions
from fibserve.bench.buffers import BufferError, open_buffer

CUDA = torch.device("cuda", 0)
SPEC = {"shape": [4, 8], "dtype": "bfloat16", "nbytes": 64, "path": "/unused"}


def _handle(**changes):
    handle = {
        "kind": "cuda_ipc",
        "device": 0,
        "handle": base64.b64encode(b"h" * 64).decode(),
        "storage_size_bytes": 2 << 20,
        "storage_offset_bytes": 0,
        "ref_counter_handle": base64.b64encode(b"/torch_1_2_0").decode(),
        "ref_counter_offset": 0,
        "tensor_offset": 0,
    }
    handle.update(changes)
    return handle


@pytest.fixture
def opened(monkeypatch):
    calls = []

    def strict_rebuild(tensor_cls, size, stride, offset, storage_cls, dtype, device, handle, size_bytes,
                       offset_bytes, requires_grad, ref_counter, ref_counter_offset, event_handle, event_sync):  # fmt: skip
        # the checks of THPStorage_newSharedCuda
        assert (
            isinstance(handle, bytes) and isinstance(ref_counter, bytes) and isinstance(event_handle, bytes)
        )
        assert isinstance(event_sync, bool)
        calls.append({"size": tuple(size), "stride": stride, "dtype": dtype, "event_sync": event_sync,
                      "event_handle": event_handle})  # fmt: skip
        return torch.empty(tuple(size), dtype=dtype)

    monkeypatch.setattr(reductions, "rebuild_cuda_tensor", strict_rebuild)
    return calls


def test_opened_with_torchs_argument_types_and_without_an_ipc_event(opened):
    tensor = open_buffer(
        _handle(event_handle=base64.b64encode(b"e" * 64).decode(), event_sync_required=True), SPEC, CUDA
    )
    assert tensor.shape == (4, 8) and tensor.dtype == torch.bfloat16
    (call,) = opened
    assert call["stride"] == (8, 1)
    assert call["event_sync"] is False and call["event_handle"] == b""


def test_a_worker_that_claims_too_small_an_allocation_is_refused(opened):
    with pytest.raises(BufferError, match="exported 32 bytes"):
        open_buffer(_handle(storage_size_bytes=32), SPEC, CUDA)
    assert opened == []
