"""Verdict fields of the versioned evaluation result are derived from structured results only."""

import json

from eval_reports import report, trace
from fibserve.trace import EvaluationStatus
from mini_ptx_agent.environment.answers import static_analysis_from
from mini_ptx_agent.environment.report import (
    SCHEMA_VERSION,
    KernelReport,
    NotEvaluated,
    SanitizerVerdict,
    StaticAnalysis,
)
from mini_ptx_agent.environment.verdict import build_report
from mini_ptx_agent.task import TaskConfig


def test_all_passed_on_gpu_above_target_meets_it() -> None:
    result = report(["PASSED", "PASSED"], speedups=[1.5, 1.2], target=1.2)
    assert result.status is EvaluationStatus.PASSED
    assert result.all_passed and result.executed_on_gpu
    assert result.min_speedup == 1.2
    assert result.target_met


def test_below_target_is_correct_but_not_met() -> None:
    result = report(["PASSED", "PASSED"], speedups=[1.5, 0.9], target=1.0)
    assert result.all_passed and not result.target_met and result.min_speedup == 0.9


def test_cpu_interpreter_timings_never_meet_a_target() -> None:
    result = report(["PASSED"], speedups=[50.0], hardware="cpu", target=1.0)
    assert result.all_passed
    assert not result.executed_on_gpu
    assert not result.target_met


def test_first_failing_status_is_the_report_status() -> None:
    result = report(["PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR"])
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert not result.all_passed and result.min_speedup is None and not result.target_met


def test_not_executed_cuda_without_a_gpu() -> None:
    task = TaskConfig(definition="gemm_n7168_k5120", language="cuda")
    result = build_report(
        task, solution_name="s", traces=[], executed=False, analysis=StaticAnalysis(compiled=True)
    )
    assert result.status is NotEvaluated.NOT_EXECUTED and not result.all_passed and not result.target_met


def test_sanitizer_failure_rejects_before_workloads() -> None:
    task = TaskConfig(definition="d", sanitizer=True)
    verdict = SanitizerVerdict(passed=False, tools=["memcheck"], summary="Invalid __global__ write")
    result = build_report(
        task, solution_name="s", traces=[trace("w0", "PASSED", speedup=3.0)], sanitizer=verdict
    )
    assert result.status is NotEvaluated.SANITIZER_FAILED and not result.all_passed and not result.target_met


def test_report_json_is_versioned_and_round_trips() -> None:
    result = report(["PASSED"], speedups=[2.0])
    data = json.loads(result.model_dump_json())
    assert data["schema"] == SCHEMA_VERSION == "ptxbench.eval.v1"
    assert {
        "status",
        "all_passed",
        "min_speedup",
        "target_met",
        "traces",
        "static_analysis",
        "sanitizer",
        "executed_on_gpu",
    } <= set(data)
    assert KernelReport.model_validate(data) == result


def _analysis_json(**fields) -> dict:
    """The ``analysis`` of a task answer as the service writes it: a real ``fibserve.check`` result, dumped."""
    from fibserve.analysis.report import Analysis

    base = {"solution": "s", "definition": "gemm_n7168_k5120", "language": "cuda", "arch": "sm_90a"}
    return Analysis(**(base | fields)).model_dump(mode="json")


def _build(status: str, log: str) -> dict:
    return {"status": status, "language": "cuda", "entry_file": "kernel.cu", "entry_symbol": "run",
            "key": "0" * 64, "build_dir": "/tmp/build", "log": log}  # fmt: skip


def test_static_analysis_reads_the_fibserve_check_answer() -> None:
    raw = _analysis_json(
        status="clean",
        build=_build("OK", "ptxas info: Used 168 registers"),
        ptx_families={"wgmma": 12, "mbarrier": 4, "setmaxnreg": 0},
        kernels=[
            {
                "name": "k1",
                "display_name": "k1",
                "sass_notable": {"HGMMA": 8, "UTMALDG": 2},
                "resources": {
                    "name": "k1",
                    "registers": 168,
                    "shared_bytes": 1024,
                    "spill_store_bytes": 8,
                    "spill_load_bytes": 4,
                },
            },
            {"name": "k2", "display_name": "k2", "sass_notable": {"SYNCS": 1},
             "resources": {"name": "k2", "registers": 40, "shared_bytes": 0}},
        ],
    )  # fmt: skip
    assert (
        raw["build"]["ok"] is True
    )  # the JSON keys the agent used to read by hand are still the wire format
    analysis = static_analysis_from(raw)
    assert analysis is not None and analysis.compiled is True
    assert analysis.compile_log == "ptxas info: Used 168 registers"
    assert analysis.ptx_families == ["mbarrier", "wgmma"]
    assert analysis.sass_families == ["HGMMA", "SYNCS", "UTMALDG"]
    assert (analysis.registers, analysis.shared_memory_bytes, analysis.spill_bytes) == (168, 1024, 12)


def test_a_build_that_failed_is_not_compiled() -> None:
    raw = _analysis_json(status="compile_error", build=_build("COMPILE_ERROR", "kernel.cu(3): error"))
    analysis = static_analysis_from(raw)
    assert (
        analysis is not None and analysis.compiled is False and analysis.compile_log == "kernel.cu(3): error"
    )


def test_policy_violation_means_not_compiled() -> None:
    raw = _analysis_json(
        status="policy_violation",
        policy=[
            {
                "rule": "cuda.library-call",
                "file": "kernel.cu",
                "line": 7,
                "message": "cublasGemmEx is not allowed",
            }
        ],
        abi=["run takes 2 arguments; the definition has 3 inputs and outputs"],
    )
    analysis = static_analysis_from(raw)
    assert analysis is not None and analysis.compiled is False
    assert analysis.policy_violations == [
        "kernel.cu:7: cublasGemmEx is not allowed (cuda.library-call)",
        "run takes 2 arguments; the definition has 3 inputs and outputs",
    ]


def test_an_analysis_the_service_could_not_make_says_nothing_about_the_kernel() -> None:
    raw = {"error": "static analysis unavailable: RuntimeError('nvcc missing')"}
    analysis = static_analysis_from(raw)
    assert analysis is not None and analysis.compiled is None and analysis.raw == raw
    assert analysis.policy_violations == [] and analysis.ptx_families == []


def test_timing_faster_than_the_roofline_never_meets_the_target() -> None:
    from mini_ptx_agent.feedback import format_feedback

    result = report(["PASSED"], speedups=[40.0])
    flagged = result.traces[0].model_copy(deep=True)
    flagged.evaluation.correctness.extra = {
        "plausibility": {"flagged": True, "floor_ms": 0.2, "latency_ms": 0.025}
    }
    again = build_report(
        TaskConfig(definition="vector_add_f32", language="triton"), solution_name="s", traces=[flagged]
    )
    assert again.all_passed and again.executed_on_gpu and again.min_speedup == 40.0
    assert again.implausible == ["w0"] and not again.target_met
    text = format_feedback(again)
    assert "IMPLAUSIBLE: faster than the roofline floor of 0.2000 ms" in text
    assert text.splitlines()[-1].startswith("VERDICT: IMPLAUSIBLY FAST")
