"""Demo turn 2 (Triton): vector_add_f32, correct for any N.

``z[N] = x[N] + y[N]`` in float32. The grid rounds up (``triton.cdiv``) and every load and store is masked
past N, so the last partial block is written and nothing outside the vectors is touched.
"""

import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(x, y, z):
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
