"""The cold-L2 gate kernel compiled for sm_90 without a GPU (Triton's compiler and its bundled ptxas): it must
fit two 32-warp programs on an SM, and its release must poll the host with volatile loads and sleeps.

What runs on the GPU (the release hiding a slow host's launch, a synchronizing call falling back) is in
tests/fibserve/bench/test_gpu_release.py."""

from __future__ import annotations

import re
import subprocess

import pytest

pytest.importorskip("triton")


@pytest.fixture(scope="module")
def compiled():
    import triton
    from fibserve.bench.worker.l2_gate_kernel import fibserve_l2_gate
    from fibserve.bench.worker.l2_state import WARPS_PER_PROGRAM
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {
        "buf_ptr": "*i32", "n": "i32", "value": "i32", "hold_ns": "i64",
        "mailbox_ptr": "*i64", "go_ptr": "*i32", "wait_ns": "i64", "BLOCK": "constexpr",
    }  # fmt: skip
    return triton.compile(
        ASTSource(fn=fibserve_l2_gate, signature=signature, constexprs={"BLOCK": 1024}),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": WARPS_PER_PROGRAM},
    )


def test_two_gate_programs_fit_one_sm(compiled, tmp_path) -> None:
    from fibserve.bench.worker.l2_state import MAX_GATE_REGISTERS
    from triton.backends.nvidia.compiler import get_ptxas

    ptx = tmp_path / "gate.ptx"
    ptx.write_text(compiled.asm["ptx"])
    out = subprocess.run(
        [get_ptxas(90).path, "-arch=sm_90a", "-v", str(ptx), "-o", str(tmp_path / "gate.cubin")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    registers = int(re.search(r"Used (\d+) registers", out.stderr).group(1))
    assert registers <= MAX_GATE_REGISTERS, out.stderr
    assert compiled.metadata.shared == 0


def test_the_release_polls_host_memory_with_volatile_loads_and_sleeps(compiled) -> None:
    ptx = compiled.asm["ptx"]
    assert "%globaltimer" in ptx
    # the mailbox (int64, written by the host) and the go flag (int32, written by program 0), never cached
    assert re.search(r"ld\.volatile\.global\.b64", ptx) and re.search(r"ld\.volatile\.global\.b32", ptx)
    assert "nanosleep.u32" in ptx
