"""Correct output, but the kernel also overwrites its input x with the result (inputs are read-only)."""

import triton
import triton.language as tl


@triton.jit
def _add_in_place(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, s, mask=mask)
    tl.store(x_ptr + offs, s, mask=mask)


def run(x, y, z):
    n = x.numel()
    _add_in_place[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
