"""The verdict on one candidate, derived from structured results: the service's traces (each workload's status,
timing facts and correctness facts), the static analysis and the sanitizer gate, into a :class:`KernelReport`.

``target_met`` needs every workload PASSED and timed on a GPU at or above the target speedup, with no timing
flagged as faster than the device's roofline; a service failure is :func:`infrastructure_report`, no verdict.
"""

from __future__ import annotations

import math

from fibserve.trace import Comparisons, Correctness, CorrectnessFacts, EvaluationStatus, TimingFacts, Trace

from ..task import TaskConfig
from .report import KernelReport, NotEvaluated, SanitizerVerdict, StaticAnalysis, WorkloadResult


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def executed_on_gpu(trace: Trace) -> bool:
    """Whether a trace's evaluation ran and was timed on a GPU.

    Decided from structured fields: ``performance.extra.measured_on`` (``gpu``/``cpu``) and ``timed`` when the
    service sets them, else ``environment.hardware`` (``cpu`` means the Triton interpreter).
    """
    evaluation = trace.evaluation
    if evaluation is None:
        return False
    facts = TimingFacts.of(evaluation.performance)
    if facts.timed is False:
        return False
    if facts.measured_on is not None:
        return facts.measured_on == "gpu"
    hardware = evaluation.environment.hardware.strip().lower()
    return not (hardware.startswith("cpu") or "interpret" in hardware)


def workload_result(trace: Trace) -> WorkloadResult:
    """Flatten one evaluated trace.

    Raises:
        ValueError: the trace has no evaluation.
    """
    evaluation = trace.evaluation
    if evaluation is None:
        raise ValueError(f"trace for workload {trace.workload.uuid} has no evaluation")
    perf, corr = evaluation.performance, evaluation.correctness
    if perf is not None and TimingFacts.of(perf).timed is False:
        perf = None  # untimed (CPU mode): older FIBServe versions sent 0.0 here instead of null
    seen = Comparisons.of(perf)
    vs_reference = seen.vs_reference
    return WorkloadResult(
        workload_uuid=trace.workload.uuid,
        axes=dict(trace.workload.axes),
        status=evaluation.status,
        hardware=evaluation.environment.hardware,
        executed_on_gpu=executed_on_gpu(trace),
        latency_ms=_finite(perf.latency_ms) if perf else None,
        reference_latency_ms=_finite(perf.reference_latency_ms) if perf else None,
        speedup=_finite(perf.speedup_factor) if perf else None,
        speedup_basis=seen.speedup_basis,
        baseline=seen.baseline.solution if seen.baseline else None,
        baseline_description=seen.baseline.description if seen.baseline else "",
        speedup_vs_reference=_finite(vs_reference.speedup) if vs_reference else None,
        reference_not_timed=vs_reference.reason if vs_reference else None,
        roofline_fraction=_finite(seen.roofline.fraction) if seen.roofline else None,
        roofline_device=seen.roofline.device_model if seen.roofline else None,
        max_absolute_error=corr.max_absolute_error if corr else None,
        max_relative_error=corr.max_relative_error if corr else None,
        log=evaluation.log,
        roofline_floor_ms=_implausible_floor(corr),
    )


def _implausible_floor(correctness: Correctness | None) -> float | None:
    """The roofline floor (ms) when the service flagged the time as below the device roofline
    (:class:`fibserve.trace.CorrectnessFacts` ``plausibility.flagged``), else None."""
    verdict = CorrectnessFacts.of(correctness).plausibility
    if verdict is None or not verdict.flagged:
        return None
    return verdict.floor_ms if verdict.floor_ms is not None else 0.0


def build_report(
    task: TaskConfig,
    *,
    solution_name: str,
    traces: list[Trace],
    executed: bool | None = True,
    analysis: StaticAnalysis | None = None,
    sanitizer: SanitizerVerdict | None = None,
    notes: str = "",
    limits_hit: dict[str, str] | None = None,
) -> KernelReport:
    """Derive the verdict fields (status, all_passed, min_speedup, target_met) from structured results.

    ``executed=False`` (CUDA without a GPU) gives ``NOT_EXECUTED`` unless the build itself failed.
    ``limits_hit``: workload uuid -> the resource limit the candidate ran into (kept on the report).
    ``target_met`` requires every workload PASSED and timed on a GPU with speedup >= ``task.target_speedup``,
    and no timing flagged as faster than the roofline.
    """
    base = {
        "definition": task.definition,
        "language": task.language,
        "task_id": task.task_id,
        "solution_name": solution_name,
        "target_speedup": task.target_speedup,
        "static_analysis": analysis,
        "sanitizer": sanitizer,
        "notes": notes,
        "traces": traces,
        "limits_hit": dict(limits_hit or {}),
    }
    if sanitizer is not None and not sanitizer.passed:
        return KernelReport(status=NotEvaluated.SANITIZER_FAILED, **base)
    results = [workload_result(t) for t in traces if t.evaluation is not None]
    failing = [r for r in results if r.status is not EvaluationStatus.PASSED]
    if failing:
        return KernelReport(status=failing[0].status, workloads=results, **base)
    if analysis is not None and analysis.compiled is False:
        return KernelReport(status=EvaluationStatus.COMPILE_ERROR, workloads=results, **base)
    if executed is False or not results:
        return KernelReport(status=NotEvaluated.NOT_EXECUTED, workloads=results, **base)
    speedups = [r.speedup for r in results]
    min_speedup = min(s for s in speedups if s is not None) if all(s is not None for s in speedups) else None
    on_gpu = all(r.executed_on_gpu for r in results)
    implausible = [r.workload_uuid for r in results if r.roofline_floor_ms is not None]
    fast_enough = min_speedup is not None and min_speedup >= task.target_speedup
    return KernelReport(
        status=EvaluationStatus.PASSED,
        workloads=results,
        all_passed=True,
        min_speedup=min_speedup,
        executed_on_gpu=on_gpu,
        implausible=implausible,
        target_met=bool(on_gpu and fast_enough and not implausible),
        **base,
    )


def infrastructure_report(task: TaskConfig, message: str, *, solution_name: str = "") -> KernelReport:
    """The result when the service failed: status INFRASTRUCTURE_ERROR with the message; no kernel verdict."""
    return KernelReport(
        status=NotEvaluated.INFRASTRUCTURE_ERROR,
        definition=task.definition,
        language=task.language,
        task_id=task.task_id,
        solution_name=solution_name,
        target_speedup=task.target_speedup,
        error=message,
    )
