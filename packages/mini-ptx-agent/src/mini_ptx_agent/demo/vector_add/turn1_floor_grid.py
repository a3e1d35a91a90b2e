"""Demo turn 1 (Triton), wrong on purpose: vector_add_f32 with a grid that drops the tail.

``z[N] = x[N] + y[N]`` in float32. One program per 1024 elements, but the grid is ``N // 1024``: when N is not
a multiple of 1024 the last partial block is never launched, its outputs keep the harness's NaN poison, and
the workload fails (INCORRECT_NUMERICAL). The mistake a first draft makes; turn 2 fixes it.
"""

import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(z_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def run(x, y, z):
    _add[(x.numel() // 1024,)](x, y, z, BLOCK=1024)
