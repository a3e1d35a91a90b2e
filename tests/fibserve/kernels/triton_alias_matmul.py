"""Policy fixture: a Triton solution that hides torch.matmul behind an alias (rejected)."""

import torch as t
import triton
import triton.language as tl
from torch import matmul as mm


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def run(a, b, c):
    product = t.empty_like(c)
    product = mm(a, b)  # the actual work is done by PyTorch
    n = c.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](product, c, n, BLOCK=1024)
    return c
