"""Demo turn 1 (Triton), wrong on purpose: vector_add_f32 with a grid that drops the tail.

``z[N] = x[N] + y[N]`` in float32. One program per 1024 elements, but the grid is ``N // 1024``: when N is not
a multiple of 1024 the last partial block is never launched, its outputs keep the harness's NaN poison, and
the workload fails (INCORRECT_NUMERICAL). The mistake a first draft makes; turn 2 fixes it.
"""

import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def _vector_add(x_ptr, y_ptr, z_ptr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)
    y = tl.load(y_ptr + offsets)
    tl.store(z_ptr + offsets, x + y)


def run(x, y, z):
    grid = (x.numel() // BLOCK_SIZE,)
    _vector_add[grid](x, y, z, BLOCK_SIZE=BLOCK_SIZE)
