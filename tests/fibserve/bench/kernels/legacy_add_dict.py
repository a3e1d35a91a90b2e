"""A 2025-format Triton solution for vector_add_f32: allocates z itself and returns {"z": z}."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(x, y):
    z = torch.empty_like(x)
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
    return {"z": z}
