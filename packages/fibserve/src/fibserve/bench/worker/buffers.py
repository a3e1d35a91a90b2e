"""Buffers shared between the trusted process and a worker (trusted side).

The trusted process writes inputs and poison into these buffers and reads outputs from them; the worker
passes them to the candidate. What crosses never lets the worker reach the trusted side's memory or files:

- **CUDA**: the worker allocates and exports CUDA IPC handles, opened here through the driver with the
  allocation's size checked against the driver's own figure (:mod:`fibserve.bench.worker.cuda_ipc`). The direction
  matters: the worker can never map trusted memory, where the reference outputs live.
- **CPU**: the trusted process creates one memfd per buffer with its size sealed, maps it, and hands the
  descriptor over (:mod:`fibserve.bench.worker.handover`); no path in the worker's file system is ever opened here,
  and the worker cannot truncate what is mapped here.

Shape, dtype and strides always come from the spec the trusted side asked for, never from a reply.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import torch

from fibserve.bench.dtypes import DTYPE_NAMES, TORCH_DTYPES
from fibserve.bench.worker.messages import BufferSpec


class BufferError(RuntimeError):
    """A buffer could not be made or opened: the worker lied about its handle (the candidate's doing, once it
    is loaded) or the machine refused memory."""


def buffer_spec(shape: tuple[int, ...], dtype: torch.dtype) -> BufferSpec:
    """The worker ``alloc`` spec of one buffer: ``{"shape", "dtype", "nbytes"}`` (bytes)."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return BufferSpec(shape=list(shape), dtype=DTYPE_NAMES[dtype], nbytes=nbytes)


def cpu_view(mapping: mmap.mmap, spec: BufferSpec) -> torch.Tensor:
    """A trusted-side tensor over ``mapping`` (this process's map of a sealed memfd, see
    :func:`fibserve.bench.worker.handover.sealed_buffer`) with ``spec``'s shape and dtype."""
    dtype = TORCH_DTYPES[spec["dtype"]]
    nbytes = int(spec["nbytes"])
    if nbytes == 0:
        return torch.empty(tuple(spec["shape"]), dtype=dtype)
    raw = torch.frombuffer(mapping, dtype=torch.uint8, count=nbytes)
    return raw.view(dtype).view(tuple(spec["shape"]))


def open_cuda_buffer(handle: dict[str, Any], spec: BufferSpec, device: torch.device) -> torch.Tensor:
    """A trusted-side tensor aliasing the worker's device buffer described by ``handle`` (its reply), with
    ``spec``'s shape and dtype.

    Raises:
        BufferError: the reply is not a CUDA IPC handle, or the driver refused it, or the buffer does not lie
            inside the allocation the driver reports (:func:`fibserve.bench.worker.cuda_ipc.open_handle`).
    """
    from fibserve.bench.worker.cuda_ipc import CudaIpcError, open_handle

    dtype = TORCH_DTYPES[spec["dtype"]]
    shape = tuple(spec["shape"])
    nbytes = int(spec["nbytes"])
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    if handle.get("kind") != "cuda_ipc":
        raise BufferError(f"the worker answered {handle.get('kind')!r} for a CUDA buffer")
    try:
        flat = open_handle(handle.get("handle"), handle.get("offset"), nbytes, dtype, device)
    except CudaIpcError as exc:
        raise BufferError(f"cannot open the worker's CUDA IPC buffer: {exc}") from None
    return flat.view(shape)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes (NaN-safe, -0.0 != 0.0): the input-mutation check."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.to(a.device).reshape(-1).view(torch.uint8)))
