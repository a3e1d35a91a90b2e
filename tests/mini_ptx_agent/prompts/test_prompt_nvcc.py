"""CI compiles what the model reads: the helper header and the example kernel, extracted from composed prompts."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mini_ptx_agent.prompts import compose_system_prompt

pytestmark = pytest.mark.nvcc

HERE = Path(__file__).resolve().parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NVCC = shutil.which("nvcc")
SM90 = "-gencode=arch=compute_90a,code=sm_90a"
SM100 = "-gencode=arch=compute_100a,code=sm_100a"


def _block_containing(prompt: str, marker: str) -> str:
    bodies = [m.group(2) for m in FENCE.finditer(prompt) if m.group(1) == "cuda" and marker in m.group(2)]
    assert len(bodies) == 1, f"expected one cuda block containing {marker!r}, found {len(bodies)}"
    return bodies[0]


def _tvm_ffi_include() -> Path:
    spec = importlib.util.find_spec("tvm_ffi")  # locate without importing (importing pulls in torch)
    assert spec is not None and spec.submodule_search_locations, "apache-tvm-ffi is not installed"
    include = Path(next(iter(spec.submodule_search_locations))) / "include"
    assert (include / "tvm" / "ffi" / "function.h").is_file(), include
    return include


def _nvcc(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    if NVCC is None:
        pytest.skip("nvcc is not on PATH")
    cmd = [NVCC, *map(str, args)]
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stdout}\n{result.stderr}"
    return result


def _cuobjdump() -> Path | None:
    found = shutil.which("cuobjdump")
    if found:
        return Path(found)
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = (
        Path(next(iter(spec.submodule_search_locations))) / "backends" / "nvidia" / "bin" / "cuobjdump"
    )
    return candidate if candidate.is_file() else None


@pytest.mark.parametrize(("tag", "gencode"), [("hopper-no-hint", SM90), ("blackwell-no-hint", SM100)])
def test_prompt_example_kernel_builds_as_a_tvm_ffi_module(tag: str, gencode: str, tmp_path: Path) -> None:
    source = _block_containing(compose_system_prompt(tag), "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run)")
    (tmp_path / "kernel.cu").write_text(source)
    _nvcc(
        gencode,
        "-O3",
        "-lineinfo",
        "-std=c++17",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-I",
        _tvm_ffi_include(),
        "kernel.cu",
        "-o",
        "kernel.so",
        cwd=tmp_path,
    )
    nm = shutil.which("nm")
    if nm:
        symbols = subprocess.run([nm, "-D", "kernel.so"], cwd=tmp_path, capture_output=True, text=True).stdout
        assert "__tvm_ffi_run" in symbols  # the symbol tvm-ffi looks up for entry point `run`


def test_hopper_helper_header_instantiates_every_helper_for_sm90a(tmp_path: Path) -> None:
    header = _block_containing(compose_system_prompt("hopper-no-hint"), "namespace hp")
    (tmp_path / "hopper_ptx.cuh").write_text(header)
    smoke = HERE / "data" / "hopper_helpers_smoke.cu"
    declared = set(re.findall(r"__forceinline__ \w+ (\w+)\(", header)) | set(
        re.findall(r"inline \w+ (\w+)\(", header)
    )
    called = set(re.findall(r"hp::(\w+)", smoke.read_text()))
    missing = declared - called - {"smem_addr", "get_encode_tiled"}  # used by the other helpers
    assert not missing, f"the smoke kernel does not call {sorted(missing)}"
    _nvcc(
        SM90,
        "-O3",
        "-lineinfo",
        "-std=c++17",
        "-I",
        tmp_path,
        "-cubin",
        smoke,
        "-o",
        tmp_path / "smoke.cubin",
        cwd=tmp_path,
    )
    cuobjdump = _cuobjdump()
    if cuobjdump is None:
        pytest.skip(
            "cuobjdump not found (neither on PATH nor in the triton wheel); compiled but SASS unchecked"
        )
    sass = subprocess.run(
        [str(cuobjdump), "-sass", "smoke.cubin"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    ).stdout
    # Each inline-PTX family must reach the hardware instruction (ptxas would drop or reject broken asm).
    for sass_op in [
        "HGMMA.64x64x16.F32.BF16",
        "UTMALDG.2D",
        "UTMALDG.2D.MULTICAST",
        "UTMASTG.2D",
        "SYNCS.ARRIVE.TRANS64",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT",
        "USETMAXREG",
        "STSM",
        "ELECT",
    ]:
        assert sass_op in sass, sass_op


def test_blackwell_helper_header_instantiates_every_helper_for_sm100a(tmp_path: Path) -> None:
    header = _block_containing(compose_system_prompt("blackwell-no-hint"), "namespace bw")
    (tmp_path / "blackwell_tcgen05.cuh").write_text(header)
    smoke = HERE / "data" / "blackwell_helpers_smoke.cu"
    declared = set(re.findall(r"(?:__forceinline__|constexpr) \w+ (\w+)\(", header))
    missing = declared - set(re.findall(r"bw::(\w+)", smoke.read_text()))
    assert not missing, f"the smoke kernel does not call {sorted(missing)}"
    _nvcc(
        SM100,
        "-O3",
        "-std=c++17",
        "-I",
        tmp_path,
        "-cubin",
        smoke,
        "-o",
        tmp_path / "smoke.cubin",
        cwd=tmp_path,
    )
    cuobjdump = _cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found; compiled but SASS unchecked")
    result = subprocess.run([str(cuobjdump), "-sass", "smoke.cubin"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    if "UTC" not in result.stdout and result.returncode != 0:
        pytest.skip(f"this cuobjdump cannot disassemble sm_100a: {result.stderr[:200]}")
    for sass_op in ["UTCHMMA", "UTCBAR", "LDTM"]:
        assert sass_op in result.stdout, sass_op


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_example_runs_in_the_interpreter(tmp_path: Path) -> None:
    body = next(
        m.group(2) for m in FENCE.finditer(compose_system_prompt("triton-hopper")) if m.group(1) == "python"
    )
    (tmp_path / "kernel.py").write_text(body)
    script = (
        "import torch, kernel\n"
        "x = torch.arange(3000, dtype=torch.float32); y = torch.ones(3000); out = torch.full((3000,), -1.0)\n"
        "kernel.run(x, y, 0.5, out)\n"
        "assert torch.equal(out, x + 0.5 * y), (out[:4], out[-4:])\n"
        "print('ok')\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
