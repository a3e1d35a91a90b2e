# Example: out = x + alpha * y for bfloat16 vectors of length N (definition inputs x[N], y[N], alpha; output out[N]).
import triton
import triton.language as tl


@triton.jit
def _scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x + alpha * y).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, y, alpha, out):
    """Inputs then outputs in definition order; `out` is preallocated by the harness (destination passing)."""
    n = x.numel()
    block = 1024
    grid = (triton.cdiv(n, block),)
    _scaled_add_kernel[grid](x, y, out, alpha, n, BLOCK=block, num_warps=4)
