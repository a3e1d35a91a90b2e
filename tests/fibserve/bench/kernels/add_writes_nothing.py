"""A Triton kernel that loads its inputs and returns without storing: only poisoning can catch it
(a harness that reuses a buffer already holding the reference answer would pass it)."""

import triton
import triton.language as tl


@triton.jit
def _nothing(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    _ = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)


def run(x, y, z):
    n = x.numel()
    _nothing[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
