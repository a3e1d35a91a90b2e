"""Buffers shared between the trusted process and a worker (trusted side).

The worker owns the memory the candidate touches; the trusted process maps it to write inputs and poison and
to read outputs. CUDA: the worker allocates and exports CUDA IPC handles, which are opened here from plain
JSON fields (never unpickled) after checking that the allocation is large enough; the direction matters: the
worker can never map trusted memory, where the reference outputs live. CPU: the trusted process creates one
file per buffer in the worker's private work directory (reaching it through the sandbox's
``/proc/<init>/root``) and both sides map it with ``torch.from_file(shared=True)``.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

import torch

from ._dtypes import DTYPE_NAMES


class BufferError(RuntimeError):
    """A buffer handle could not be opened (an infrastructure problem, or a worker that lied)."""


def buffer_spec(shape: tuple[int, ...], dtype: torch.dtype, inner: Path, here: Path) -> dict[str, Any]:
    """The worker ``alloc`` spec of one buffer; this creates the zero-filled backing file for a CPU worker at
    ``here``, which the worker sees as ``inner`` (the spec names ``inner`` only)."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    with open(here, "wb") as handle:
        handle.truncate(max(nbytes, 1))
    return {"shape": list(shape), "dtype": DTYPE_NAMES[dtype], "nbytes": nbytes, "path": str(inner)}


def _b64(value: Any) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BufferError("malformed handle field")
    return base64.b64decode(value)


def open_buffer(
    handle: dict[str, Any], spec: dict[str, Any], device: torch.device, here: Path | None = None
) -> torch.Tensor:
    """A trusted-side tensor aliasing the worker buffer described by ``handle`` with ``spec``'s shape/dtype.

    Shape, dtype and strides come from ``spec`` (what we asked for), never from the worker's reply; a CPU
    buffer is mapped from ``here``, where :func:`buffer_spec` created it.

    Raises:
        BufferError: unknown handle kind, an allocation smaller than the tensor, or a CUDA IPC failure.
    """
    from ._dtypes import TORCH_DTYPES

    dtype = TORCH_DTYPES[spec["dtype"]]
    shape = tuple(spec["shape"])
    nbytes = int(spec["nbytes"])
    kind = handle.get("kind")
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    if device.type != "cuda":
        if kind != "file" or handle.get("path") != spec["path"]:
            raise BufferError(f"worker answered {kind!r} for a CPU file buffer")
        path = str(here) if here is not None else spec["path"]
        raw = torch.from_file(path, shared=True, size=max(nbytes, 1), dtype=torch.uint8)
        return raw[:nbytes].view(dtype).view(shape)
    if kind != "cuda_ipc":
        raise BufferError(f"worker answered {kind!r} for a CUDA buffer")
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    try:
        size_bytes = int(handle["storage_size_bytes"])
        offset_bytes = int(handle["storage_offset_bytes"])
        tensor_offset = int(handle["tensor_offset"])
        element = torch.empty((), dtype=dtype).element_size()
        if tensor_offset < 0 or size_bytes < nbytes + tensor_offset * element:
            raise BufferError(f"worker exported {size_bytes} bytes for a {nbytes}-byte buffer")
        stride = []
        acc = 1
        for extent in reversed(shape):
            stride.append(acc)
            acc *= max(extent, 1)
        return rebuild_cuda_tensor(
            torch.Tensor,
            torch.Size(shape),
            tuple(reversed(stride)),
            tensor_offset,
            torch.UntypedStorage,
            dtype,
            int(handle["device"]),
            _b64(handle["handle"]),
            size_bytes,
            offset_bytes,
            False,
            _b64(handle["ref_counter_handle"]),
            int(handle["ref_counter_offset"]),
            # Never open an IPC event of the worker: it allocated and synchronized before replying, and an
            # opened event stays mapped here after the worker is gone (see fibserve.bench.worker._export_cuda).
            # torch requires bytes in this position even when no event is used.
            b"",
            False,
        )
    except BufferError:
        raise
    except Exception as exc:
        raise BufferError(f"cannot open the worker's CUDA IPC buffer: {exc!r}") from exc


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes (NaN-safe, -0.0 != 0.0): the input-mutation check."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.to(a.device).reshape(-1).view(torch.uint8)))
