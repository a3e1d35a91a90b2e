"""Oracle of the Harbor task vector_add_f32: z = x + y, float32, one program per 1024 elements."""

import triton
import triton.language as tl


@triton.jit
def _vector_add(x_ptr, y_ptr, z_ptr, length, TILE: tl.constexpr):
    index = tl.program_id(0) * TILE + tl.arange(0, TILE)
    inside = index < length
    total = tl.load(x_ptr + index, mask=inside) + tl.load(y_ptr + index, mask=inside)
    tl.store(z_ptr + index, total, mask=inside)


def run(x, y, z):
    length = x.numel()
    _vector_add[(triton.cdiv(length, 1024),)](x, y, z, length, TILE=1024)
