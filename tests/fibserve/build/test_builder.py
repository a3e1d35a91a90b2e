"""Real nvcc builds with the tvm-ffi binding, the build cache, and Python/Triton packages."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from fibserve.build import BuildStatus, build_solution, load_python_entry
from fibserve.build.cuda import trim_compiler_log
from fibserve.sandbox import status as sandbox_status
from fibserve.trace import Solution
from kernel_fixtures import fixture_solution

pytestmark = pytest.mark.nvcc


def _solution(sources: dict[str, str], entry: str, language: str = "cuda") -> Solution:
    return Solution.model_validate(
        {
            "name": "multi",
            "definition": "d",
            "author": "a",
            "spec": {
                "language": language,
                "target_hardware": ["NVIDIA_H100"],
                "entry_point": entry,
                "binding": "tvm-ffi" if language in ("cuda", "cpp") else None,
            },
            "sources": [{"path": p, "content": c} for p, c in sources.items()],
        }
    )


def test_simt_kernel_builds_with_products_and_is_cached(tmp_path: Path) -> None:
    # its own cache: the run's shared one may hold this kernel, for either target, already
    solution = fixture_solution("simt_add.cu")
    first = build_solution(solution, cache_dir=tmp_path)
    assert first.status == BuildStatus.OK, first.log
    assert first.arch == "sm_90a"
    assert first.library_path is not None and first.library_path.is_file()
    assert b"__tvm_ffi_run\0" in first.library_path.read_bytes()
    assert first.ptx_path is not None and ".target sm_90a" in first.ptx_path.read_text()
    assert first.cubin_path is not None and first.cubin_path.read_bytes()[:4] == b"\x7fELF"
    assert "Used" in first.log and "registers" in first.log  # the ptxas -v report is kept
    assert (Path(first.build_dir) / "build.log").is_file()
    assert not (Path(first.build_dir) / "keep").exists()  # intermediates are removed
    assert "nvcc" in first.toolchain and "tvm-ffi" in first.toolchain
    assert first.sandbox == sandbox_status().mode == "bwrap"

    start = time.perf_counter()
    again = build_solution(solution, cache_dir=tmp_path)
    elapsed_ms = (time.perf_counter() - start) * 1000
    assert again.cached and again.status == BuildStatus.OK and again.build_dir == first.build_dir
    assert elapsed_ms < 200  # the 50 ms target is measured in benchmarks/static_analysis.py

    other_arch = build_solution(solution, cache_dir=tmp_path, arch="sm_100a")
    assert other_arch.key != first.key and not other_arch.cached
    assert other_arch.status == BuildStatus.OK, other_arch.log
    assert ".target sm_100a" in other_arch.ptx_path.read_text()  # type: ignore[union-attr]


def test_a_build_linked_against_another_tvm_ffi_library_is_not_reused(
    build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library's rpath names the tvm-ffi it was linked against: another environment (another checkout's
    virtual environment) must build its own."""
    import fibserve.build.builder as builder
    from fibserve.build.cache import build_key
    from fibserve.build.cuda import BASE_FLAGS
    from fibserve.build.toolchain import TvmFfiPaths, tvm_ffi_paths

    solution = fixture_solution("simt_add.cu")
    here = build_solution(solution, cache_dir=build_cache)
    assert here.toolchain["tvm-ffi-library"] == tvm_ffi_paths().library

    def key() -> str:
        return build_key(builder._key_payload(solution, here.arch, [*BASE_FLAGS], builder._toolchain("cuda")))

    assert key() == here.key  # the key recomputed the builder's way
    elsewhere = TvmFfiPaths(
        include_dirs=tvm_ffi_paths().include_dirs, library="/elsewhere/.venv/libtvm_ffi.so"
    )
    monkeypatch.setattr(builder, "tvm_ffi_paths", lambda: elsewhere)
    assert key() != here.key


def test_arch_comes_from_tvm_ffi_cuda_arch_list(build_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "10.0a")
    result = build_solution(fixture_solution("simt_add.cu"), cache_dir=build_cache)
    assert result.arch == "sm_100a" and result.status == BuildStatus.OK


def test_syntax_error_is_a_compile_error_with_nvccs_message(build_cache: Path) -> None:
    result = build_solution(fixture_solution("syntax_error.cu"), cache_dir=build_cache)
    assert result.status == BuildStatus.COMPILE_ERROR and not result.ok
    assert "syntax_error.cu(10): error" in result.log  # the missing ';' is reported on the next line
    assert "undeclared_scale" in result.log
    assert str(build_cache) not in result.log  # paths are the candidate's own
    assert "ptxas info" not in result.log
    assert build_solution(fixture_solution("syntax_error.cu"), cache_dir=build_cache).cached


def test_several_files_and_a_named_entry_symbol(build_cache: Path) -> None:
    header = "#pragma once\n__device__ inline float twice(float x) { return 2.0f * x; }\n"
    launcher = (
        '#include "common/twice.cuh"\n#include <cstdint>\n'
        "__global__ void twice_kernel(float* y, int64_t n) {\n"
        "  int64_t i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = twice(y[i]);\n}\n"
        "void launch_twice(float* y, int64_t n) { twice_kernel<<<(n + 255) / 256, 256>>>(y, n); }\n"
    )
    binding = (
        "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/function.h>\n#include <cstdint>\n"
        "void launch_twice(float* y, int64_t n);\n"
        "void double_in_place(tvm::ffi::TensorView y) { launch_twice(static_cast<float*>(y.data_ptr()), y.size(0)); }\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(double_in_place, double_in_place);\n"
    )
    solution = _solution(
        {"main.cpp": binding, "kernels/twice.cu": launcher, "kernels/common/twice.cuh": header},
        "main.cpp::double_in_place",
    )
    result = build_solution(solution, cache_dir=build_cache)
    assert result.status == BuildStatus.OK, result.log
    assert result.entry_symbol == "double_in_place"
    assert [Path(p).name for p in result.ptx] == ["twice.ptx"]
    assert b"__tvm_ffi_double_in_place\0" in result.library_path.read_bytes()  # type: ignore[union-attr]


def test_two_sources_with_one_file_name_are_refused(build_cache: Path) -> None:
    solution = _solution({"a/k.cu": "int a;\n", "b/k.cu": "int b;\n"}, "a/k.cu::run")
    result = build_solution(solution, cache_dir=build_cache)
    assert result.status == BuildStatus.COMPILE_ERROR and "['k']" in result.log


def test_missing_export_is_a_compile_error(build_cache: Path) -> None:
    code = "#include <tvm/ffi/function.h>\nvoid run() {}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(other, run);\n"
    result = build_solution(_solution({"kernel.cu": code}, "kernel.cu::run"), cache_dir=build_cache)
    assert result.status == BuildStatus.COMPILE_ERROR
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run" in result.log


def test_timeout_kills_the_compiler_and_is_not_cached(tmp_path: Path) -> None:
    solution = fixture_solution("hopper_gemm_ws.cu")
    result = build_solution(solution, cache_dir=tmp_path, timeout_s=0.5)
    assert result.status == BuildStatus.TIMEOUT
    assert not (tmp_path / "builds" / result.key).exists()
    assert Path(result.build_dir).is_dir()  # kept for its log until the next build of this key
    again = build_solution(solution, cache_dir=tmp_path, timeout_s=0.5)
    assert again.status == BuildStatus.TIMEOUT and not again.cached
    assert [p.name for p in (tmp_path / "builds").iterdir()] == [Path(again.build_dir).name]


def _build_in_child(args: tuple[str, str]) -> tuple[bool, float]:
    cache, file_name = args
    from kernel_fixtures import fixture_solution as make

    result = build_solution(make(file_name), cache_dir=Path(cache))
    return result.cached, result.timings_ms.get("compile", 0.0)


def test_concurrent_builders_compile_once(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        outcomes = pool.map(_build_in_child, [(str(tmp_path), "cublas_only_in_comments.cu")] * 2)
    assert sorted(cached for cached, _ in outcomes) == [False, True]
    assert len(list((tmp_path / "builds").iterdir())) == 1


def test_triton_package_is_written_and_imported_by_module_path(build_cache: Path) -> None:
    helper = "SCALE = 3\n"
    entry = "from .helpers.consts import SCALE\n\ndef run(x):\n    return [SCALE * v for v in x]\n"
    solution = _solution(
        {"kernel.py": entry, "helpers/consts.py": helper}, "kernel.py::run", language="triton"
    )
    result = build_solution(solution, cache_dir=build_cache)
    assert result.status == BuildStatus.OK and result.package is not None
    assert load_python_entry(result)([1, 2]) == [3, 6]


def test_python_syntax_error_is_a_compile_error(build_cache: Path) -> None:
    solution = _solution({"kernel.py": "def run(x):\n    return (\n"}, "kernel.py::run", language="triton")
    result = build_solution(solution, cache_dir=build_cache)
    assert result.status == BuildStatus.COMPILE_ERROR and "kernel.py(2)" in result.log


def test_trim_keeps_errors_with_context_and_drops_noise() -> None:
    log = (
        "ptxas info    : Used 12 registers\n"
        '/cache/builds/k/src/kernel.cu(7): error: identifier "x" is undefined\n'
        "    y = x;\n        ^\n\n"
        '1 error detected in the compilation of "kernel.cu".\n'
    )
    trimmed = trim_compiler_log(log, Path("/cache/builds/k"))
    assert trimmed.splitlines()[:3] == [
        'kernel.cu(7): error: identifier "x" is undefined',
        "    y = x;",
        "        ^",
    ]
    assert "ptxas info" not in trimmed


def test_tvm_ffi_loads_the_library_and_finds_the_entry(build_cache: Path) -> None:
    from fibserve.build import load_tvm_ffi_entry

    result = build_solution(fixture_solution("simt_add.cu"), cache_dir=build_cache)
    assert result.ok, result.log
    entry = load_tvm_ffi_entry(result)  # dlopen works without a GPU; calling it needs one
    assert callable(entry)
