"""Oracle of the Harbor task rmsnorm_f32: y = x * rsqrt(mean(x^2) + eps) * weight, one program per row (H = 512)."""

import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, w_ptr, y_ptr, hidden, eps, WIDTH: tl.constexpr):
    base = tl.program_id(0) * hidden
    column = tl.arange(0, WIDTH)
    inside = column < hidden
    row = tl.load(x_ptr + base + column, mask=inside, other=0.0)
    scale = 1.0 / tl.sqrt(tl.sum(row * row, axis=0) / hidden + eps)
    weight = tl.load(w_ptr + column, mask=inside, other=0.0)
    tl.store(y_ptr + base + column, row * scale * weight, mask=inside)


def run(x, weight, eps, y):
    rows, hidden = x.shape
    _rmsnorm[(rows,)](x, weight, y, hidden, eps, WIDTH=triton.next_power_of_2(hidden))
