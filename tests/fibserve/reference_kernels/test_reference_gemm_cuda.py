"""The reference CUDA GEMM builds for sm_90a with nvcc and really uses Hopper's tensor-core path.

Built by FIBServe's own builder, as any CUDA candidate is (tvm-ffi binding, `-gencode=arch=compute_90a,
code=sm_90a`), through the run's build cache: the same build (same sources, flags and toolchain) serves
test_solutions.py and the quickstart, so nvcc compiles this kernel once per run. Its SASS, read by the server's
cuobjdump, must contain HGMMA (wgmma), UTMALDG (TMA loads), register reallocation (setmaxnreg) and stmatrix,
and must not touch local memory. No GPU is needed; the GPU check is marked `gpu`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.nvcc, pytest.mark.slow]


@pytest.fixture(scope="module")
def analysis(gemm_dir: Path):
    """``fibserve.check`` of kernel.cu for sm_90a: the build and its SASS opcode counts."""
    import fibserve
    from fibserve.static_analysis import solution_from_path

    result = fibserve.check(solution_from_path(gemm_dir / "kernel.cu", "gemm_n7168_k5120"), arch="sm_90a")
    assert result.status == "clean" and result.build is not None, result.build.log if result.build else result
    if result.sass_tool is None:
        pytest.skip("no cuobjdump on PATH or in the Triton wheel")
    return result


@pytest.fixture(scope="module")
def built(analysis) -> tuple[Path, str]:
    """(shared library, nvcc + ptxas report) for kernel.cu."""
    assert analysis.build.library_path is not None
    return analysis.build.library_path, analysis.build.log


@pytest.fixture(scope="module")
def sass_opcodes(analysis) -> Counter[str]:
    """Counts of SASS opcode families (text before the first dot) over every kernel of the library."""
    return Counter(analysis.sass_opcodes)


def test_sass_uses_wgmma_and_tma(sass_opcodes: Counter[str]) -> None:
    assert sass_opcodes["HGMMA"] > 0, "no HGMMA: the kernel fell off the wgmma path"
    assert sass_opcodes["UTMALDG"] > 0, "no UTMALDG: operands are not loaded by TMA"


def test_sass_uses_warp_specialization_and_stmatrix(sass_opcodes: Counter[str]) -> None:
    assert sass_opcodes["USETMAXREG"] > 0, "setmaxnreg was dropped (needs __launch_bounds__(384, 1))"
    assert sass_opcodes["STSM"] > 0, "the epilogue no longer stages through stmatrix"


def test_no_local_memory(sass_opcodes: Counter[str], built: tuple[Path, str]) -> None:
    """Accumulators must stay in registers: no spills, no LDL/STL."""
    assert sass_opcodes["LDL"] == 0 and sass_opcodes["STL"] == 0
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built[1])
    assert spills, "ptxas -v report missing"
    assert all(s == ("0", "0") for s in spills), built[1]


def test_every_tile_shape_is_built(built: tuple[Path, str]) -> None:
    """BN = 128, 224 and 256 are all instantiated (pick_block_n may choose any of them)."""
    report = built[1]
    for bn, stages in [(128, 6), (224, 4), (256, 4)]:
        assert f"gemm_bf16_tn_kernelILi{bn}ELi{stages}E" in report


def test_exports_run_with_checked_arguments(built: tuple[Path, str]) -> None:
    """tvm-ffi loads the module and `run` rejects CPU and non-bf16 tensors with clear errors."""
    import torch
    import tvm_ffi

    run = tvm_ffi.load_module(str(built[0]))["run"]
    a = torch.ones(4, 5120, dtype=torch.bfloat16)
    b = torch.ones(7168, 5120, dtype=torch.bfloat16)
    c = torch.empty(4, 7168, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="must be on CUDA"):
        run(a, b, c)
    with pytest.raises(TypeError, match="must be bfloat16"):
        run(a.float(), b, c)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [70, 232, 972, 2379, 8192])
def test_matches_torch_on_gpu(built: tuple[Path, str], m: int) -> None:
    """Every bundled M: NaN-poisoned output fully written, bf16-close to fp32 torch, no row >= M touched."""
    import torch
    import tvm_ffi

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    run = tvm_ffi.load_module(str(built[0]))["run"]
    a = torch.randn(m, 5120, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
    buf = torch.full((m + 16, 7168), float("nan"), device="cuda", dtype=torch.bfloat16)
    run(a, b, buf[:m])
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    out = buf[:m].float()
    assert torch.isfinite(out).all()
    assert ((out - ref).abs() <= 0.25 + 1e-2 * ref.abs()).all()
    assert torch.isnan(buf[m:]).all()
