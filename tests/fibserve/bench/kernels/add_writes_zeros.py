"""A Triton kernel that ignores its inputs and writes zeros: passes an elementwise check whose atol exceeds
every output, which only the relative-norm check of near-constant outputs catches."""

import triton
import triton.language as tl


@triton.jit
def _zeros(z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(z_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


def run(x, y, z):
    n = z.numel()
    _zeros[(triton.cdiv(n, 1024),)](z, n, BLOCK=1024)
