"""Oracle of the Harbor task softmax_rows_f32: a numerically stable row softmax, one program per row (N = 1024)."""

import triton
import triton.language as tl


@triton.jit
def _row_softmax(x_ptr, y_ptr, row_length, WIDTH: tl.constexpr):
    base = tl.program_id(0) * row_length
    column = tl.arange(0, WIDTH)
    inside = column < row_length
    row = tl.load(x_ptr + base + column, mask=inside, other=float("-inf"))
    shifted = tl.exp(row - tl.max(row, axis=0))
    tl.store(y_ptr + base + column, shifted / tl.sum(shifted, axis=0), mask=inside)


def run(x, y):
    rows, row_length = x.shape
    _row_softmax[(rows,)](x, y, row_length, WIDTH=triton.next_power_of_2(row_length))
