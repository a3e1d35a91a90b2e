"""Definition dtype names to torch dtypes (no dependency besides torch: the sandbox worker imports this)."""

from __future__ import annotations

import torch

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}
if hasattr(torch, "float4_e2m1fn_x2"):
    TORCH_DTYPES["float4_e2m1"] = torch.float4_e2m1fn_x2

DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in TORCH_DTYPES.items()}


def poison_(tensor: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill ``tensor`` in place with a value no honest kernel leaves behind by accident.

    Floats with a NaN encoding: NaN. Integers: the dtype's minimum (the sentinel). bool and float4 (no NaN,
    too few values for a sentinel): fresh random bits, so an untouched output matches with probability
    ``2**-n``. Returns ``tensor``.
    """
    if tensor.numel() == 0:
        return tensor
    if tensor.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        return tensor.fill_(float("nan"))
    if tensor.dtype in (torch.int64, torch.int32, torch.int16, torch.int8):
        return tensor.fill_(torch.iinfo(tensor.dtype).min)
    raw = tensor.view(torch.uint8)
    raw.copy_(torch.randint(0, 256, raw.shape, generator=generator, device=raw.device, dtype=torch.uint8))
    if tensor.dtype == torch.bool:
        raw.bitwise_and_(1)
    return tensor
