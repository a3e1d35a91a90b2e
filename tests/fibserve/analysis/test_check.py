"""fibserve.check and `fibserve check` give the right verdict for each test kernel (real nvcc, real cuobjdump)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fibserve
import pytest
from fibserve.analysis.sass import find_cuobjdump
from fibserve.trace import Definition, Solution, SourceFile
from kernel_fixtures import (
    KERNELS,
    PLANTED_PTXAS_MESSAGE,
    cuda_solution,
    fixture_solution,
    with_planted_ptxas_log,
)

needs_cuobjdump = pytest.mark.skipif(
    find_cuobjdump() is None, reason="no cuobjdump on PATH or in the Triton wheel"
)


@pytest.mark.nvcc
@needs_cuobjdump
def test_hopper_kernel_uses_hgmma_tma_and_mbarrier(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("hopper_wgmma_tma.cu"), cache_dir=build_cache)
    assert analysis.status == "clean" and analysis.ok and not analysis.executed
    verdict = analysis.verdict
    assert verdict is not None
    assert verdict.uses_hopper_tensor_cores and verdict.uses_tma and verdict.uses_mbarrier
    assert not verdict.uses_setmaxnreg and verdict.architecture_specific and not verdict.spills
    (kernel,) = analysis.kernels
    assert "wgmma_tma_kernel" in kernel.display_name
    assert kernel.sass_notable["HGMMA"] >= 1 and kernel.sass_notable["UTMALDG"] == 2
    assert kernel.ptx_families["wgmma.mma_async"] == 1 and kernel.ptx_families["cp.async.bulk.tensor"] == 2
    assert (
        kernel.resources is not None and kernel.resources.registers and kernel.resources.shared_bytes > 4096
    )
    assert "HGMMA yes, TMA yes, mbarrier yes" in verdict.summary


@pytest.mark.nvcc
@needs_cuobjdump
def test_warp_specialized_gemm_uses_every_hopper_family(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("hopper_gemm_ws.cu"), cache_dir=build_cache)
    verdict = analysis.verdict
    assert verdict is not None and verdict.uses_setmaxnreg and verdict.uses_tma
    families = analysis.ptx_families
    for family in (
        "wgmma.mma_async",
        "cp.async.bulk.tensor",
        "mbarrier",
        "setmaxnreg",
        "stmatrix",
        "elect.sync",
    ):
        assert families.get(family, 0) > 0, family
    for opcode in ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG", "STSM"):
        assert analysis.sass_opcodes.get(opcode, 0) > 0, opcode


@pytest.mark.nvcc
@needs_cuobjdump
def test_simt_kernel_uses_no_architecture_features(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("simt_add.cu"), cache_dir=build_cache)
    assert analysis.status == "clean"
    verdict = analysis.verdict
    assert verdict is not None and not verdict.architecture_specific
    assert not (verdict.uses_hopper_tensor_cores or verdict.uses_tma or verdict.uses_mbarrier)
    assert analysis.ptx_families == {}
    assert analysis.kernels[0].resources is not None and analysis.kernels[0].resources.registers


@pytest.mark.nvcc
@needs_cuobjdump
def test_instructions_ptxas_compiled_away_do_not_count(build_cache: Path) -> None:
    """A TMA load, an mbarrier and a setmaxnreg under a predicate ptxas proves false are in the PTX and not in
    the SASS: the verdict took them from the PTX, so a plain add read as a Hopper kernel that uses TMA, and the
    agent's check of its target families (wgmma or TMA on sm_90a, read from these flags) passed."""
    analysis = fibserve.check(fixture_solution("ptx_only_tma.cu"), cache_dir=build_cache)
    assert analysis.status == "clean"
    assert analysis.ptx_families.get("cp.async.bulk.tensor") and analysis.ptx_families.get("mbarrier")
    assert not any(op.startswith(("UTMA", "SYNCS", "USETMAXREG")) for op in analysis.sass_opcodes)
    verdict = analysis.verdict
    assert verdict is not None
    assert not (verdict.uses_tma or verdict.uses_mbarrier or verdict.uses_setmaxnreg)
    assert not verdict.architecture_specific and not verdict.uses_hopper_tensor_cores
    assert any("cp.async.bulk.tensor is in the PTX but no UTMALDG" in note for note in verdict.notes)


def test_cublas_kernel_is_a_policy_violation_and_is_not_built(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("cublas_gemm.cu"), cache_dir=build_cache)
    assert analysis.status == "policy_violation" and analysis.build is None
    assert any(v.rule == "cuda.library-call" and "cublasGemmEx" in v.message for v in analysis.policy)


def test_triton_alias_matmul_is_a_policy_violation(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("triton_alias_matmul.py"), cache_dir=build_cache)
    assert analysis.status == "policy_violation"
    assert any("torch.matmul" in v.message for v in analysis.policy)


def test_clean_triton_kernel_is_accepted_without_binary_analysis(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("triton_clean.py"), cache_dir=build_cache)
    assert analysis.status == "clean" and analysis.verdict is None and analysis.arch is None
    assert any("not analysed statically" in note for note in analysis.notes)


def test_check_accepts_the_path_of_a_kernel_file(tmp_path: Path, build_cache: Path) -> None:
    """``fibserve.check("/path")`` reads the file as `fibserve check` does (it raised AttributeError)."""
    for path in (KERNELS / "triton_clean.py", str(KERNELS / "triton_clean.py")):
        analysis = fibserve.check(path, cache_dir=build_cache)
        assert (analysis.solution, analysis.language, analysis.status) == ("triton_clean", "triton", "clean")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a kernel")
    with pytest.raises(ValueError, match=r"expected a \.cu, \.cpp, \.py or solution \.json file"):
        fibserve.check(notes, cache_dir=build_cache)


@pytest.mark.nvcc
def test_syntax_error_is_a_compile_error(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("syntax_error.cu"), cache_dir=build_cache)
    assert analysis.status == "compile_error" and analysis.build is not None
    assert "syntax_error.cu(10): error" in analysis.build.log and analysis.verdict is None


def test_entry_arity_is_checked_against_the_definition(build_cache: Path) -> None:
    definition = Definition.model_validate(
        {
            "name": "add",
            "op_type": "elementwise",
            "axes": {"n": {"type": "var"}},
            "inputs": {"a": {"shape": ["n"], "dtype": "float32"}},
            "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
            "reference": "def run(a):\n    return a\n",
        }
    )
    analysis = fibserve.check(
        fixture_solution("cublas_gemm.cu"), definition=definition, cache_dir=build_cache
    )
    assert analysis.abi and "takes 3 parameters" in analysis.abi[0] and "a, out" in analysis.abi[0]


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "fibserve"), "check", *args]
    env = {
        "FIBSERVE_CACHE_DIR": str(cache),
        "PATH": str(Path(sys.executable).parent) + ":/usr/local/bin:/usr/bin:/bin",
    }
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.nvcc
@needs_cuobjdump
def test_cli_json_and_exit_codes(build_cache: Path) -> None:
    clean = _cli(str(KERNELS / "hopper_wgmma_tma.cu"), "--json", cache=build_cache)
    assert clean.returncode == 0, clean.stderr
    body = json.loads(clean.stdout)
    assert body["status"] == "clean" and body["verdict"]["uses_tma"] and body["sass_opcodes"]["HGMMA"] >= 1

    rejected = _cli(str(KERNELS / "cublas_gemm.cu"), cache=build_cache)
    assert rejected.returncode == 1 and "cuda.library-call" in rejected.stdout

    broken = _cli(str(KERNELS / "syntax_error.cu"), "--json", cache=build_cache)
    assert broken.returncode == 1 and json.loads(broken.stdout)["status"] == "compile_error"

    human = _cli(str(KERNELS / "hopper_wgmma_tma.cu"), cache=build_cache)
    assert human.returncode == 0 and "HGMMA yes" in human.stdout and "not executed" in human.stdout

    missing = _cli(str(KERNELS / "no_such_kernel.cu"), cache=build_cache)
    assert missing.returncode == 2 and "no_such_kernel.cu" in missing.stderr


def test_solution_json_is_accepted(tmp_path: Path, build_cache: Path) -> None:
    solution = fixture_solution("triton_alias_matmul.py")
    path = tmp_path / "solution.json"
    path.write_text(solution.model_dump_json())
    result = _cli(str(path), "--json", cache=build_cache)
    assert result.returncode == 1 and json.loads(result.stdout)["status"] == "policy_violation"


@pytest.mark.nvcc
@needs_cuobjdump
def test_blackwell_kernel_uses_tcgen05_on_sm_100a(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("blackwell_tcgen05.cu"), arch="sm_100a", cache_dir=build_cache)
    assert analysis.status == "clean" and analysis.arch == "sm_100a"
    verdict = analysis.verdict
    assert verdict is not None and verdict.uses_tcgen05 and verdict.uses_blackwell_tensor_cores
    assert not verdict.uses_hopper_tensor_cores
    assert analysis.ptx_families["tcgen05"] >= 5
    assert analysis.sass_opcodes.get("UTCHMMA", 0) >= 1 and analysis.sass_opcodes.get("LDTM", 0) >= 1
    assert verdict.summary.startswith("sm_100a: tcgen05 MMA yes")


@pytest.mark.nvcc
def test_blackwell_kernel_does_not_build_for_hopper(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("blackwell_tcgen05.cu"), arch="sm_90a", cache_dir=build_cache)
    assert analysis.status == "compile_error" and analysis.build is not None
    assert "Instruction 'tcgen05.alloc' not supported on .target 'sm_90a'" in analysis.build.log
    lines = (KERNELS / "blackwell_tcgen05.cu").read_text().splitlines()
    alloc_line = 1 + next(i for i, line in enumerate(lines) if 'asm volatile("tcgen05.alloc' in line)
    # ptxas speaks in PTX lines; the log also names the source line of the asm statement.
    assert f"(blackwell_tcgen05.cu:{alloc_line});" in analysis.build.log


@pytest.mark.nvcc
def test_obfuscated_cublas_is_caught_after_the_build(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("cublas_obfuscated.cu"), cache_dir=build_cache)
    assert analysis.status == "policy_violation" and not analysis.ok
    assert analysis.build is not None and analysis.build.ok  # it built; the binary gave it away
    assert [v.rule for v in analysis.policy] == ["cuda.imported-symbol"]


@pytest.mark.nvcc
def test_a_build_log_planted_with_warnings_hides_no_cublas_and_plants_no_kernel(build_cache: Path) -> None:
    planted = with_planted_ptxas_log(fixture_solution("cublas_obfuscated.cu"))
    analysis = fibserve.check(planted, cache_dir=build_cache)
    assert analysis.status == "policy_violation"
    assert [v.rule for v in analysis.policy] == ["cuda.imported-symbol"]
    assert "x" not in [k.name for k in analysis.kernels]


@pytest.mark.nvcc
@needs_cuobjdump
def test_a_pragma_message_imitating_ptxas_plants_no_kernel_and_no_registers(build_cache: Path) -> None:
    """The kernel's report is held to its cubin (cuobjdump --dump-resource-usage): the imitation lines in the
    front end's and the host compiler's copies of the message planted kernel `x` and 200 registers."""
    honest = fibserve.check(fixture_solution("simt_add.cu"), cache_dir=build_cache)
    planted = fibserve.check(
        with_planted_ptxas_log(fixture_solution("simt_add.cu"), PLANTED_PTXAS_MESSAGE), cache_dir=build_cache
    )
    assert planted.build is not None and "Used 200 registers" in planted.build.log
    ((kernel, truth),) = [
        (k.resources, h.resources) for k, h in zip(planted.kernels, honest.kernels, strict=True)
    ]
    assert kernel is not None and truth is not None and not truth.from_cubin
    assert (kernel.name, kernel.registers, kernel.stack_bytes) == (
        truth.name,
        truth.registers,
        truth.stack_bytes,
    )
    assert kernel.from_cubin and kernel.barriers is None and kernel.spill_store_bytes is None
    assert planted.verdict is not None
    assert any("repeated or contradicted its cubin" in note for note in planted.verdict.notes)
    assert "spills unknown" in planted.verdict.summary


@pytest.mark.nvcc
@needs_cuobjdump
def test_a_sass_dump_that_fails_does_not_switch_the_cubin_check_off(
    build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resource usage is read by a call of its own (no disassembler): when it shared the SASS dump's call,
    a dump that failed (an opcode an older cuobjdump cannot decode) left the planted numbers unchecked."""
    from fibserve.analysis import binary
    from fibserve.analysis.sass import SassReport

    monkeypatch.setattr(binary, "dump_sass", lambda cubins: SassReport(error="cuobjdump failed on x.cubin"))
    planted = fibserve.check(
        with_planted_ptxas_log(fixture_solution("simt_add.cu"), PLANTED_PTXAS_MESSAGE), cache_dir=build_cache
    )
    assert [k.name for k in planted.kernels] == ["_Z10add_kernelPKfS0_Pfl"]
    (kernel,) = planted.kernels
    assert kernel.resources is not None and kernel.resources.from_cubin and kernel.resources.registers != 200


@pytest.mark.nvcc
@needs_cuobjdump
def test_a_log_that_could_not_be_held_to_its_cubins_says_so_and_claims_no_spill_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When cuobjdump reads a build's SASS but not its resource usage, the ptxas report is the log's as the
    candidate may have written it: until now nothing said so, and its planted "0 bytes spill" read as no spills
    (in the verdict, and as 0 bytes in the agent's feedback and the CLI's table, which read the kernels')."""
    from fibserve.analysis import binary
    from fibserve.analysis.sass import UnreadableBinary

    def unreadable(cubin: Path) -> None:
        raise UnreadableBinary(f"cuobjdump could not read what {cubin.name} embeds: planted")

    monkeypatch.setattr(binary, "resource_usage", unreadable)
    planted = fibserve.check(  # a cache of its own: the run's cache holds this build's checked analysis
        with_planted_ptxas_log(fixture_solution("simt_add.cu"), PLANTED_PTXAS_MESSAGE), cache_dir=tmp_path
    )
    assert planted.verdict is not None and planted.verdict.spills is None
    assert "spills unknown" in planted.verdict.summary
    for kernel in planted.kernels:  # what the agent's feedback and the CLI's table read
        assert kernel.resources is not None and kernel.resources.spill_store_bytes is None
        assert kernel.resources.spill_load_bytes is None and kernel.resources.barriers is None
    assert any(
        "not checked against the cubins (cuobjdump could not read what" in note
        for note in planted.verdict.notes
    )


@pytest.mark.nvcc
def test_the_binary_policy_runs_when_the_ptx_and_sass_analysis_fails(
    build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibserve import static_analysis

    def broken(*args: object) -> None:
        raise ValueError("planted")

    monkeypatch.setattr(static_analysis, "_analyse_binary", broken)
    analysis = fibserve.check(fixture_solution("cublas_obfuscated.cu"), cache_dir=build_cache)
    assert analysis.status == "policy_violation"
    assert [v.rule for v in analysis.policy] == ["cuda.imported-symbol"]
    assert any("the PTX/SASS analysis failed (ValueError('planted'))" in note for note in analysis.notes)
    # with no violation among the imports, the kernels' names are still unchecked: no clean analysis comes back
    with pytest.raises(ValueError, match="planted"):
        fibserve.check(fixture_solution("simt_add.cu"), cache_dir=build_cache)


@pytest.mark.nvcc
def test_an_error_quoting_a_ptxas_location_of_4400_digits_is_a_compile_error(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("error_with_ptxas_location.cu"), cache_dir=build_cache)
    assert analysis.status == "compile_error"
    assert analysis.build is not None and "planted" in analysis.build.log


@pytest.mark.nvcc
def test_a_ptx_that_is_not_text_is_still_the_candidates_compile_error(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("error_ptx_not_text.cu"), cache_dir=build_cache)
    assert analysis.status == "compile_error"
    assert analysis.build is not None and "non-ASCII character" in analysis.build.log


def test_ptxas_locations_point_at_the_source_in_one_pass_over_the_ptx(tmp_path: Path) -> None:
    """Each location the log names (the candidate's `#warning` text can name thousands) once scanned the PTX
    back from its line; now each PTX file is read once, with replacement characters where it is not text."""
    import time

    from fibserve.build.cuda import annotate_ptxas_errors

    body = "".join(f"\t.loc 1 {n} 1\n\tadd.s32 %r1, %r1, 1;\n" for n in range(1, 100_001))
    (tmp_path / "kernel.ptx").write_bytes(b'.file 1 "/b/src/kernel.cu"\n// \xff\n' + body.encode())
    assert annotate_ptxas_errors("ptxas kernel.ptx, line 4; error", tmp_path) == (
        "ptxas kernel.ptx, line 4 (kernel.cu:1); error"
    )
    assert annotate_ptxas_errors("ptxas kernel.ptx, line 2;", tmp_path) == "ptxas kernel.ptx, line 2;"
    assert annotate_ptxas_errors("ptxas kernel.ptx, line 0;", tmp_path) == "ptxas kernel.ptx, line 0;"
    planted = "#warning ptxas kernel.ptx, line 200002;\n" * 5_000
    start = time.perf_counter()
    annotated = annotate_ptxas_errors(planted, tmp_path)
    assert time.perf_counter() - start < 10.0
    assert annotated.count("(kernel.cu:100000);") == 5_000


_LAUNCHES_HIDDEN = """#include <tvm/ffi/function.h>
#include <tvm/ffi/container/tensor.h>
void launch_hidden(float* x);
__global__ void visible(float* x) { x[0] = 1.0f; }
void run(tvm::ffi::TensorView x) {
  visible<<<1, 1>>>(static_cast<float*>(x.data_ptr()));
  launch_hidden(static_cast<float*>(x.data_ptr()));
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""
_CUTLASS_NAMED = """namespace cutlass { namespace gemm {
__global__ void hidden_kernel(float* x) { x[0] = 2.0f; }
void launch(float* x) { hidden_kernel<<<1, 1>>>(x); }
} }
using namespace cutlass;
void launch_hidden(float* x) { gemm::launch(x); }
"""


def _two_sources(second: str) -> Solution:
    solution = cuda_solution(_LAUNCHES_HIDDEN, name=f"hidden-in-{second}")
    return solution.model_copy(
        update={"sources": [*solution.sources, SourceFile(path=second, content=_CUTLASS_NAMED)]}
    )


@pytest.mark.nvcc
def test_a_source_named_like_the_device_link_keeps_its_cubin_in_the_analysis(build_cache: Path) -> None:
    """Every `*_dlink.cubin` was taken for nvcc's device-link cubin: `a_dlink.cu`'s kernel, named into
    CUTLASS's namespace, went unanalysed and unchecked, and the solution read clean."""
    analysis = fibserve.check(_two_sources("a_dlink.cu"), cache_dir=build_cache)
    assert analysis.status == "policy_violation"
    assert [v.rule for v in analysis.policy] == ["cuda.library-kernel"]
    assert any(k.name.startswith("_ZN7cutlass4gemm13hidden_kernel") for k in analysis.kernels)


@pytest.mark.nvcc
@needs_cuobjdump
def test_kernels_the_library_holds_are_checked_even_when_no_kept_cubin_has_them(
    build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names the policy checks come from the library itself too (cuobjdump reads every cubin it embeds),
    so a cubin the build did not keep beside it hides no kernel."""
    from fibserve.build import cuda

    collect = cuda._collect_products

    def losing_one(keep: Path, out: Path) -> tuple[list[str], list[str]]:
        ptx, cubins = collect(keep, out)
        return [p for p in ptx if "hidden" not in p], [c for c in cubins if "hidden" not in c]

    monkeypatch.setattr(cuda, "_collect_products", losing_one)
    analysis = fibserve.check(_two_sources("hidden.cu"), cache_dir=build_cache)
    assert analysis.status == "policy_violation"
    assert [v.rule for v in analysis.policy] == ["cuda.library-kernel"]
    assert any("the library holds functions no analysed cubin does" in note for note in analysis.notes)


@pytest.mark.nvcc
@needs_cuobjdump
def test_a_library_whose_embedded_cubins_cannot_be_read_is_never_clean(build_cache: Path) -> None:
    """Bytes of the candidate's own in the `.nv_fatbin` section made cuobjdump fail on the library: the
    functions it embeds went unchecked, and the solution read clean."""
    from fibserve.analysis.sass import UnreadableBinary

    source = """#include <tvm/ffi/function.h>
#include <tvm/ffi/container/tensor.h>
__global__ void visible(float* x) { x[0] = 1.0f; }
__attribute__((section(".nv_fatbin"), used)) static const unsigned char junk[16] = {
    0x50, 0xed, 0x55, 0xba, 1, 0, 0x10, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
void run(tvm::ffi::TensorView x) { visible<<<1, 1>>>(static_cast<float*>(x.data_ptr())); }
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""
    solution = cuda_solution(source, name="junk-fatbin")
    with pytest.raises(UnreadableBinary, match=r"could not read what solution\.so embeds"):
        fibserve.check(solution, cache_dir=build_cache)


def test_cli_policy_file_configures_the_benchmark(tmp_path: Path, build_cache: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("python_languages: []\n")
    relaxed = _cli(
        str(KERNELS / "triton_alias_matmul.py"), "--policy", str(policy), "--json", cache=build_cache
    )
    assert relaxed.returncode == 0 and json.loads(relaxed.stdout)["status"] == "clean"
    policy.write_text("no_such_field: 1\n")
    broken = _cli(str(KERNELS / "triton_alias_matmul.py"), "--policy", str(policy), cache=build_cache)
    assert broken.returncode == 2 and "no_such_field" in broken.stderr


@pytest.mark.nvcc
@needs_cuobjdump
def test_register_spills_are_reported(build_cache: Path) -> None:
    analysis = fibserve.check(fixture_solution("register_spills.cu"), cache_dir=build_cache)
    assert analysis.status == "clean" and analysis.verdict is not None
    (kernel,) = analysis.kernels
    assert kernel.resources is not None and kernel.resources.registers is not None
    assert kernel.resources.registers <= 32  # __launch_bounds__(1024, 2)
    assert kernel.resources.spill_store_bytes > 0 and kernel.resources.spill_load_bytes > 0
    assert analysis.verdict.spills and "spills yes" in analysis.verdict.summary
    assert any(
        note.startswith("spilling_kernel(") and "spill stores" in note for note in analysis.verdict.notes
    )


def test_an_entry_exported_under_another_cpp_name_is_not_an_abi_mismatch() -> None:
    """TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, host_fn) is a valid tvm-ffi entry; the evaluator rejects a candidate
    for any ABI problem, so not finding a C++ function named `run` must not be reported as one."""
    from fibserve.static_analysis import check_arity
    from fibserve.trace import Solution

    definition = Definition.model_validate(
        {
            "name": "add",
            "op_type": "elementwise",
            "axes": {"n": {"type": "var"}},
            "inputs": {"a": {"shape": ["n"], "dtype": "float32"}},
            "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
            "reference": "def run(a):\n    return a\n",
        }
    )
    source = (
        "#include <tvm/ffi/function.h>\n"
        "void host_fn(tvm::ffi::TensorView a, tvm::ffi::TensorView out) {}\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, host_fn);\n"
    )
    solution = Solution.model_validate(
        {
            "name": "renamed",
            "definition": "add",
            "author": "tests",
            "spec": {
                "language": "cuda",
                "target_hardware": ["sm_90a"],
                "entry_point": "kernel.cu::run",
                "binding": "tvm-ffi",
            },
            "sources": [{"path": "kernel.cu", "content": source}],
        }
    )
    assert check_arity(solution, definition) == []


def test_an_evaluation_reads_the_analysis_or_why_there_is_none() -> None:
    from fibserve.analysis.report import AnalysisUnavailable, read_analysis
    from pydantic import ValidationError

    assert read_analysis({"error": "static analysis unavailable: boom"}) == AnalysisUnavailable(
        error="static analysis unavailable: boom"
    )
    assert read_analysis(None) is None
    with pytest.raises(ValidationError):
        read_analysis({"status": "clean"})


def test_an_analysis_that_raises_is_recorded_as_unavailable_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A toolchain that breaks is recorded, never the candidate's fault (the evaluator then stops a CUDA
    candidate as a task error: tests/fibserve/bench/test_cuda_without_gpu.py)."""
    from fibserve import static_analysis

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("cuobjdump vanished")

    monkeypatch.setattr(static_analysis, "check", broken)
    outcome = static_analysis.analyse(None, None, "sm_90a", 1.0)  # type: ignore[arg-type]
    assert isinstance(outcome, static_analysis.AnalysisUnavailable)
    assert outcome.error == "static analysis unavailable: RuntimeError('cuobjdump vanished')"
