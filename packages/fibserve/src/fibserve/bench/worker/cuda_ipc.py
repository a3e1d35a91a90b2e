"""CUDA IPC of device buffers through the driver API: exported by a worker, opened by the trusted side.

A worker's device buffers are shared with the trusted process (which fills inputs and poison and reads
outputs) as CUDA IPC memory handles. The trusted side opens them here with the CUDA driver API, not with
``torch.multiprocessing``'s ``rebuild_cuda_tensor``, because torch's path trusts the exporter: it maps a
reference-counter file of the exporter's choosing from the host's ``/dev/shm`` (which GPU workers share) and,
when the tensor is freed, decrements an ``int64`` at an offset of the exporter's choosing in it, and it takes
the allocation's size from the exporter's message. A candidate controls all three. Here:

- the only thing taken from the worker is the 64-byte handle and an offset; no file is opened;
- the allocation's real size comes from the driver (``cuMemGetAddressRange`` on the opened pointer), and a
  buffer that does not fit inside it is refused before any tensor exists, so the trusted side never writes
  outside memory the worker really exported (which would fault the trusted CUDA context and stop the lane);
- each open is closed when the last tensor viewing it is freed (``cuIpcCloseMemHandle``; opens of the same
  handle are reference-counted by the driver).

Sources: CUDA Driver API, "Interprocess communication" (``cuIpcGetMemHandle`` takes an allocation's base,
``cuIpcOpenMemHandle`` returns the base of the mapping, ``CU_IPC_HANDLE_SIZE`` is 64 bytes); the CUDA Array
Interface, version 3 (how torch wraps a device pointer without copying).
"""

from __future__ import annotations

import base64
import ctypes
import functools
from typing import Any

import torch

HANDLE_BYTES = 64
"""``CU_IPC_HANDLE_SIZE``."""

_LAZY_ENABLE_PEER_ACCESS = 1
"""``CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS``, the one flag ``cuIpcOpenMemHandle`` accepts."""


class CudaIpcError(RuntimeError):
    """A driver call of the IPC exchange failed, or a worker's handle does not describe what it claims."""


class _Handle(ctypes.Structure):
    # bytes, not c_char: ctypes reads a c_char array as a C string, cut at its first zero byte (the first GPU
    # run of this exchange sent 4 of the 64 bytes)
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]

    def encoded(self) -> str:
        """The 64 bytes as base64 text."""
        return base64.b64encode(bytes(self.reserved)).decode()

    @classmethod
    def decoded(cls, raw: bytes) -> _Handle:
        """A handle holding ``raw`` (exactly 64 bytes, checked by the caller)."""
        return cls((ctypes.c_ubyte * HANDLE_BYTES).from_buffer_copy(raw))


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaIpcError(f"the CUDA driver library cannot be loaded: {exc}") from None
    u64, size_t = ctypes.c_uint64, ctypes.c_size_t
    driver.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(u64), ctypes.POINTER(size_t), u64]
    driver.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), u64]
    driver.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(u64), _Handle, ctypes.c_uint]
    driver.cuIpcCloseMemHandle.argtypes = [u64]
    for name in (
        "cuMemGetAddressRange_v2",
        "cuIpcGetMemHandle",
        "cuIpcOpenMemHandle_v2",
        "cuIpcCloseMemHandle",
    ):
        getattr(driver, name).restype = ctypes.c_int
    return driver


def _check(result: int, what: str) -> None:
    if result != 0:
        raise CudaIpcError(f"{what} failed (CUresult {result})")


def _address_range(pointer: int) -> tuple[int, int]:
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(
        _driver().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), pointer),
        "cuMemGetAddressRange",
    )
    return base.value, size.value


def export_handle(tensor: torch.Tensor) -> dict[str, Any]:
    """Worker side: ``{"kind": "cuda_ipc", "handle": base64 of 64 bytes, "offset": bytes}`` for the device
    allocation holding ``tensor`` (torch's caching allocator sub-allocates, so the offset of the tensor's first
    byte from the allocation's base is sent along).

    Raises:
        CudaIpcError: the driver refused (e.g. memory that cannot be exported).
    """
    torch.cuda.synchronize(tensor.device)  # the driver calls below use this thread's current context
    pointer = tensor.data_ptr()
    base, _size = _address_range(pointer)
    handle = _Handle()
    _check(_driver().cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    return {
        "kind": "cuda_ipc",
        "handle": handle.encoded(),
        "offset": pointer - base,
    }


class _Mapping:
    """One open of a worker's handle, exposed to torch as a byte range (CUDA Array Interface v3), closed when
    torch frees the last tensor made from it."""

    def __init__(self, pointer: int, nbytes: int, device: torch.device, base: int):
        self.pointer, self.nbytes, self.device, self.base = pointer, nbytes, device, base

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.pointer, False), "version": 3,
                "strides": None, "stream": None}  # fmt: skip

    def __del__(self) -> None:
        try:
            with torch.cuda.device(self.device):
                _driver().cuIpcCloseMemHandle(self.base)
        except Exception:
            pass  # at interpreter exit or after the context failed there is nothing left to close


def open_handle(
    handle: Any, offset: Any, nbytes: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Trusted side: a flat ``nbytes``-byte tensor of ``dtype`` (``nbytes // element size`` elements) over
    the worker's buffer described by ``handle`` (base64 text of 64 bytes) and ``offset`` (bytes from the
    allocation's base), both as the worker sent them and both checked here.

    Raises:
        CudaIpcError: a malformed handle or offset, a handle the driver cannot open, or a buffer that does
            not lie inside the allocation the driver reports (the worker lied).
    """
    if not isinstance(handle, str) or isinstance(offset, bool) or not isinstance(offset, int):
        raise CudaIpcError("malformed CUDA IPC handle fields")
    try:
        raw = base64.b64decode(handle, validate=True)
    except ValueError:
        raise CudaIpcError("the CUDA IPC handle is not base64") from None
    element = torch.empty((), dtype=dtype).element_size()
    if len(raw) != HANDLE_BYTES or offset < 0 or offset % element:
        raise CudaIpcError(f"malformed CUDA IPC handle ({len(raw)} bytes, offset {offset})")
    torch.cuda.synchronize(device)  # makes the device's primary context current in this thread
    base = ctypes.c_uint64()
    native = _Handle.decoded(raw)
    _check(
        _driver().cuIpcOpenMemHandle_v2(ctypes.byref(base), native, _LAZY_ENABLE_PEER_ACCESS),
        "cuIpcOpenMemHandle",
    )
    mapping = _Mapping(base.value + offset, nbytes, device, base.value)  # closes the open when dropped
    start, size = _address_range(base.value)
    if start != base.value or offset + nbytes > size:
        raise CudaIpcError(
            f"the worker exported a {size}-byte allocation for a {nbytes}-byte buffer at offset {offset}"
        )
    if nbytes == 0:
        return torch.empty(0, dtype=dtype, device=device)
    return torch.as_tensor(mapping, device=device).view(dtype)
