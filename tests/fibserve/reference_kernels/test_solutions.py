"""The reference kernels as Solutions of the bundled trace set (one source of truth, statically clean).

* The committed solution JSON files are exactly what ``fibserve.datasets.reference_solutions`` writes from the
  kernel files, so a kernel edit without regenerating fails here.
* ``TraceSet.load(default_root())`` lists both as solutions of ``gemm_n7168_k5120`` and validates clean.
* ``fibserve.check`` on the CUDA Solution builds it with the real nvcc for sm_90a and finds HGMMA (wgmma) and
  UTMALDG (TMA) in the SASS; the Triton Solution passes the source policy. One nvcc build per session (module
  fixture, through FIBServe's build cache).

The GPU regression tests (every bundled workload PASSED through ``fibserve.bench.Evaluator``) are in
``test_solutions_gpu.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fibserve.datasets import default_root
from fibserve.datasets.reference_solutions import (
    AUTHOR,
    REFERENCE_KERNELS,
    reference_solutions,
    solution_path,
    write_reference_solutions,
)
from fibserve.trace import Definition, Solution
from fibserve.trace.trace_set import TraceSet
from fibserve.trace.validate import validate_roots

GEMM = "gemm_n7168_k5120"
CUDA_NAME = "gemm_n7168_k5120_ptxbench_cuda_wgmma_tma"
TRITON_NAME = "gemm_n7168_k5120_ptxbench_triton_tma"


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


@pytest.fixture(scope="module")
def definition(bundled: TraceSet) -> Definition:
    return bundled.definition(GEMM)


def _by_name(bundled: TraceSet, name: str) -> Solution:
    return next(s for s in bundled.solutions_for(GEMM) if s.name == name)


def test_committed_json_is_what_the_generator_writes(tmp_path: Path) -> None:
    written = write_reference_solutions(tmp_path)
    assert len(written) == len(REFERENCE_KERNELS) == 2
    for path in written:
        committed = default_root() / path.relative_to(tmp_path)
        assert committed.is_file(), (
            f"{committed} missing: run python -m fibserve.datasets.reference_solutions"
        )
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale (a kernel file changed): run python -m fibserve.datasets.reference_solutions"
        )


def test_no_stale_ptxbench_solution_files_are_committed(bundled: TraceSet) -> None:
    """A renamed or removed reference kernel must not leave its old JSON behind."""
    expected = {default_root() / solution_path(k) for k in REFERENCE_KERNELS}
    files = (default_root() / "solutions").rglob("*.json")
    ours = {p for p in files if json.loads(p.read_text()).get("author") == AUTHOR}
    assert ours == expected
    assert {s.name for s in bundled.solutions.values() if s.author == AUTHOR} == {
        k.name for k in REFERENCE_KERNELS
    }


def test_bundled_set_lists_both_as_solutions_of_the_gemm(bundled: TraceSet, gemm_dir: Path) -> None:
    solutions = {s.name: s for s in bundled.solutions_for(GEMM)}
    assert {CUDA_NAME, TRITON_NAME} <= set(solutions)
    cuda, triton = solutions[CUDA_NAME], solutions[TRITON_NAME]
    assert cuda.author == triton.author == "ptxbench"
    cuda_spec = cuda.spec.model_dump(mode="json")
    triton_spec = triton.spec.model_dump(mode="json")
    assert (cuda_spec["language"], cuda_spec["binding"], cuda_spec["entry_point"]) == (
        "cuda",
        "tvm-ffi",
        "kernel.cu::run",
    )
    assert (triton_spec["language"], triton_spec.get("binding"), triton_spec["entry_point"]) == (
        "triton",
        None,
        "kernel.py::run",
    )
    assert cuda.spec.destination_passing_style and triton.spec.destination_passing_style
    assert cuda.entry_source().content == (gemm_dir / "kernel.cu").read_text()
    assert triton.entry_source().content == (gemm_dir / "kernel.py").read_text()


def test_loaded_solutions_equal_the_generated_ones(bundled: TraceSet) -> None:
    for solution in reference_solutions():
        loaded = _by_name(bundled, solution.name)
        assert loaded == solution
        assert loaded.hash() == solution.hash()


def test_bundled_set_validates_clean() -> None:
    report = validate_roots([default_root()])
    assert report.counts["errors"] == 0 and report.counts["warnings"] == 0, report.problems
    assert report.counts["solutions"] >= 2


def test_triton_solution_passes_the_source_policy(bundled: TraceSet) -> None:
    import fibserve
    from fibserve.build import check_policy

    triton = _by_name(bundled, TRITON_NAME)
    assert check_policy(triton) == []
    analysis = fibserve.check(triton)
    assert analysis.status == "clean" and analysis.policy == []
    assert analysis.executed is False


def test_triton_solution_abi_matches_the_definition(bundled: TraceSet, definition: Definition) -> None:
    import fibserve

    assert fibserve.check(_by_name(bundled, TRITON_NAME), definition=definition).abi == []


@pytest.fixture(scope="module")
def cuda_analysis(bundled: TraceSet, definition: Definition):
    """``fibserve.check`` of the CUDA Solution for sm_90a (real nvcc; 30-60 s cold, cached afterwards)."""
    import fibserve

    return fibserve.check(_by_name(bundled, CUDA_NAME), definition=definition, arch="sm_90a")


@pytest.mark.nvcc
@pytest.mark.slow
def test_cuda_solution_builds_clean_with_the_definition_abi(cuda_analysis) -> None:
    assert cuda_analysis.status == "clean", cuda_analysis.build.log if cuda_analysis.build else cuda_analysis
    assert cuda_analysis.policy == []
    assert cuda_analysis.abi == []
    assert cuda_analysis.arch == "sm_90a"
    assert cuda_analysis.executed is False


@pytest.mark.nvcc
@pytest.mark.slow
def test_cuda_solution_sass_has_hgmma_and_utmaldg(cuda_analysis) -> None:
    sass = cuda_analysis.sass_opcodes
    assert sass.get("HGMMA", 0) > 0, f"no HGMMA in the SASS: {sorted(sass)}"
    assert sass.get("UTMALDG", 0) > 0, f"no UTMALDG in the SASS: {sorted(sass)}"
    ptx = cuda_analysis.ptx_families
    assert ptx.get("wgmma.mma_async", 0) > 0 and ptx.get("cp.async.bulk.tensor", 0) > 0
    verdict = cuda_analysis.verdict
    assert verdict.uses_hopper_tensor_cores and verdict.uses_tma and verdict.uses_mbarrier
    assert verdict.uses_setmaxnreg and not verdict.spills
