"""The gate kernel of :class:`fibserve.bench.worker.l2_state.Gate` (Triton; imported only where a gate is built).

``fibserve_l2_gate[(programs,)](buf, n, value, hold_ns, mailbox, go, wait_ns, BLOCK=1024, num_warps=32)``: the programs
write ``value`` into ``buf[0:n]`` (int32) in a grid-stride loop, then each spins on the GPU's global timer
(``%globaltimer``, ns) until ``hold_ns`` after it began, keeping its warp slots taken. With ``wait_ns > 0`` they
then keep spinning until the host *releases* them or ``wait_ns`` after they began, whichever comes first:
program 0 polls ``mailbox[0]`` (host-mapped pinned memory, which the host sets to ``value`` once it has queued
the whole timed call) with a short ``nanosleep`` between reads, stores ``value`` into ``go[0]`` (device memory)
and the nanoseconds it waited into ``mailbox[1]``; the other programs poll ``go[0]``, so only one program's
warps read across the host link. With ``n = 0``, ``hold_ns = 0`` and ``wait_ns = 0`` (one program) it does
nothing: :meth:`~fibserve.bench.worker.l2_state.Gate.mark` launches it so to mark where a timed call ended in
CUPTI's records (:mod:`fibserve.bench.worker.kernel_span`). Its name is unusual on purpose: a candidate's
kernel of the same name would blur which records are the harness's. Compiled for sm_90 with Triton 3.6 it must fit in 32 registers a thread (two programs
fill an SM's 64 warp slots); :class:`~fibserve.bench.worker.l2_state.Gate` checks.
"""

import triton
import triton.language as tl


@triton.jit
def _now():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _nap():
    """Sleep up to 500 ns (``nanosleep``, sm_70+): 8,000 polling warps would otherwise hammer one L2 line."""
    return tl.inline_asm_elementwise(
        "nanosleep.u32 500; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit(do_not_specialize=["n", "value", "hold_ns", "wait_ns"])  # one kernel for every value and hold
def fibserve_l2_gate(buf_ptr, n, value, hold_ns, mailbox_ptr, go_ptr, wait_ns, BLOCK: tl.constexpr):
    """See the module docstring."""
    began = _now()
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        tl.store(buf_ptr + offs, value, mask=offs < n)
    now = began
    while now - began < hold_ns:  # keep this SM's warp slots taken until the hold is over
        now = _now()
    if wait_ns > 0:  # then until the host has queued the timed call (or the wait runs out)
        held = now
        if tl.program_id(0) == 0:
            seen = tl.load(mailbox_ptr, volatile=True).to(tl.int32)
            while (seen != value) & (now - began < wait_ns):
                _nap()
                seen = tl.load(mailbox_ptr, volatile=True).to(tl.int32)
                now = _now()
            tl.store(go_ptr, value)
            tl.store(mailbox_ptr + 1, now - held)
        else:
            seen = tl.load(go_ptr, volatile=True)
            while (seen != value) & (now - began < wait_ns):
                _nap()
                seen = tl.load(go_ptr, volatile=True)
                now = _now()
