"""The gate kernel of :class:`fibserve.bench.worker.l2_state.Gate` (Triton; imported only where a gate is built).

``gate[(programs,)](buf, n, value, hold_ns, BLOCK=1024, num_warps=32)``: the programs write ``value`` into
``buf[0:n]`` (int32) in a grid-stride loop, then each spins on the GPU's global timer (``%globaltimer``, ns)
until ``hold_ns`` after it began, keeping its warp slots taken. Compiled for sm_90 with Triton 3.6 it uses 22
registers a thread and no shared memory, so two programs fill an SM's 64 warp slots.
"""

import triton
import triton.language as tl


@triton.jit
def _now():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit(do_not_specialize=["n", "value", "hold_ns"])  # one compiled kernel for every value and hold
def gate(buf_ptr, n, value, hold_ns, BLOCK: tl.constexpr):
    """See the module docstring."""
    began = _now()
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        tl.store(buf_ptr + offs, value, mask=offs < n)
    now = began
    while now - began < hold_ns:  # keep this SM's warp slots taken until the hold is over
        now = _now()
