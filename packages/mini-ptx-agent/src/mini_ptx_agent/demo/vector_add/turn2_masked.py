"""Demo turn 2 (Triton): vector_add_f32, correct for any N.

``z[N] = x[N] + y[N]`` in float32. The grid rounds up (``triton.cdiv``) and every load and store is masked
past N, so the last partial block is written and nothing outside the vectors is touched.
"""

import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def _vector_add(x_ptr, y_ptr, z_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_range = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_range, other=0.0)
    y = tl.load(y_ptr + offsets, mask=in_range, other=0.0)
    tl.store(z_ptr + offsets, x + y, mask=in_range)


def run(x, y, z):
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    _vector_add[grid](x, y, z, n_elements, BLOCK_SIZE=BLOCK_SIZE)
