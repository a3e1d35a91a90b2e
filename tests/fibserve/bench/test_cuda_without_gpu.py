"""CUDA candidates on a machine without a GPU: built and analysed with real nvcc, never executed, never PASSED."""

from __future__ import annotations

import pytest
import torch
from fibserve.bench import Evaluator
from fibserve.build import build_solution
from fibserve.trace import EvaluationStatus

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(
        torch.cuda.is_available(), reason="checks the no-GPU path; the GPU suite covers execution"
    ),
]

DEFINITION = "gemm_n7168_k5120"
GPU_KERNELS = [
    "gemm_naive.cu",
    "gemm_wrong.cu",
    "gemm_oob_write.cu",
    "gemm_hang.cu",
    "gemm_no_write.cu",
    "gemm_mutate_input.cu",
    "gemm_pointer_cache.cu",
    "gemm_content_cache.cu",
    "gemm_leaves_work.cu",
    "gemm_side_stream.cu",
]


@pytest.fixture(autouse=True)
def _need_nvcc():
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator("cpu", warm_spare=False) as ev:
        yield ev


@pytest.mark.parametrize("kernel", GPU_KERNELS)
def test_gpu_suite_kernels_build_for_sm90a(kernel, make_solution, build_cache):
    # the run's shared cache: built here or by another test of this run, never by an earlier run
    result = build_solution(
        make_solution(kernel, DEFINITION, language="cuda"), arch="sm_90a", cache_dir=build_cache
    )
    assert result.ok, result.log


def test_cuda_candidate_gets_static_analysis_and_an_explicit_not_executed(
    evaluator, trace_set, make_solution
):
    definition = trace_set.definition(DEFINITION)
    workloads = trace_set.workloads_for(DEFINITION)[:2]
    report = evaluator.evaluate(
        definition, make_solution("gemm_naive.cu", DEFINITION, language="cuda"), workloads
    )
    assert report.task_error is None, report.task_error
    assert report.executed is False and not report.all_passed
    assert [t.evaluation for t in report.traces] == [None, None]
    assert any("not executed" in note for note in report.notes)
    assert (
        report.analysis is not None and report.analysis.status == "clean" and report.analysis.arch == "sm_90a"
    )
    assert report.build is not None and report.build.status == "OK"


def test_wrong_cuda_kernel_is_not_judged_without_a_gpu(evaluator, trace_set, make_solution):
    definition = trace_set.definition(DEFINITION)
    workloads = trace_set.workloads_for(DEFINITION)[:1]
    report = evaluator.evaluate(
        definition, make_solution("gemm_wrong.cu", DEFINITION, language="cuda"), workloads
    )
    assert report.traces[0].evaluation is None and report.executed is False


def test_cublas_candidate_is_rejected_by_the_source_policy(evaluator, trace_set, make_solution):
    definition = trace_set.definition(DEFINITION)
    workloads = trace_set.workloads_for(DEFINITION)[:1]
    report = evaluator.evaluate(
        definition, make_solution("gemm_cublas.cu", DEFINITION, language="cuda"), workloads
    )
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.COMPILE_ERROR
    assert "cuda.library-header" in ev.log


def test_cuda_compile_error_is_reported_with_the_log(evaluator, trace_set, make_solution):
    definition = trace_set.definition(DEFINITION)
    workloads = trace_set.workloads_for(DEFINITION)[:1]
    solution = make_solution("gemm_naive.cu", DEFINITION, language="cuda")
    broken = solution.sources[0].model_copy(
        update={"content": solution.sources[0].content.replace("acc +=", "acc +== ")}
    )
    solution = solution.model_copy(update={"sources": [broken]})
    report = evaluator.evaluate(definition, solution, workloads)
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.COMPILE_ERROR and "error" in ev.log


def test_cuda_entry_with_wrong_arity_is_compile_error(evaluator, trace_set, make_solution):
    definition = trace_set.definition(DEFINITION)
    workloads = trace_set.workloads_for(DEFINITION)[:1]
    solution = make_solution("gemm_naive.cu", DEFINITION, language="cuda")
    source = (
        solution.sources[0]
        .content.replace(
            "void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C)",
            "void run(tvm::ffi::TensorView A, tvm::ffi::TensorView C)",
        )
        .replace("B.size(0)", "C.size(1)")
        .replace("B.size(1) != K || ", "")
        .replace("B.data_ptr()", "A.data_ptr()")
    )
    solution = solution.model_copy(
        update={"sources": [solution.sources[0].model_copy(update={"content": source})]}
    )
    report = evaluator.evaluate(definition, solution, workloads)
    ev = report.traces[0].evaluation
    assert ev.status is EvaluationStatus.COMPILE_ERROR and "ABI" in ev.log


def test_a_candidate_whose_analysis_failed_is_not_run_and_not_blamed(
    evaluator, trace_set, make_solution, monkeypatch
):
    """A CUDA candidate's source and binary policy are read from its static analysis: when the analysis fails,
    the evaluation stops as a task error (a harness failure) instead of going on unchecked, as it did."""
    from fibserve.analysis.report import AnalysisUnavailable
    from fibserve.bench import session

    def unavailable(*args, **kwargs):
        return AnalysisUnavailable(error="static analysis unavailable: ValueError('planted')")

    monkeypatch.setattr(session, "analyse", unavailable)
    definition = trace_set.definition(DEFINITION)
    report = evaluator.evaluate(
        definition,
        make_solution("gemm_naive.cu", DEFINITION, language="cuda"),
        trace_set.workloads_for(DEFINITION)[:1],
    )
    assert report.task_error is not None and report.task_error.startswith(
        "not run: static analysis unavailable"
    )
    assert report.build is None and all(t.evaluation is None for t in report.traces)


def test_an_error_quoting_a_ptxas_location_of_4400_digits_is_the_candidates_compile_error(
    evaluator, trace_set, make_solution
):
    report = evaluator.evaluate(
        trace_set.definition(DEFINITION),
        _fixture_kernel("error_with_ptxas_location.cu"),
        trace_set.workloads_for(DEFINITION)[:1],
    )
    assert report.task_error is None, report.task_error
    assert report.traces[0].evaluation.status is EvaluationStatus.COMPILE_ERROR


def test_a_planted_build_log_does_not_hide_a_cublas_call_from_the_binary_policy(evaluator, trace_set):
    from kernel_fixtures import with_planted_ptxas_log

    report = evaluator.evaluate(
        trace_set.definition("vector_add_f32"),
        with_planted_ptxas_log(_fixture_kernel("cublas_obfuscated.cu", definition="vector_add_f32")),
        trace_set.workloads_for("vector_add_f32")[:1],
    )
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.COMPILE_ERROR and "cuda.imported-symbol" in evaluation.log


def _fixture_kernel(name: str, definition: str = DEFINITION):
    """tests/fibserve/kernels/<name> as a CUDA Solution of ``definition``."""
    from kernel_fixtures import fixture_solution

    return fixture_solution(name).model_copy(update={"definition": definition})
