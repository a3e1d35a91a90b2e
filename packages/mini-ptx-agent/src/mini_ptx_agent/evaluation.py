"""Evaluation of one candidate kernel for a fixed task: the versioned result, the backend protocol, FIBServe.

The agent and `ptxbench eval` see evaluation through one small protocol, :class:`EvaluationBackend`
(``definition(name)`` and ``evaluate(solution, task)``), and one result, :class:`EvaluationReport`. The real
backend is :class:`FIBServeBackend` (the HTTP client of FIBServe). Every decision downstream (feedback verdict,
``Submitted``, exit codes) is made from the structured fields here, never from log text.

A failure of the service itself (unreachable, task failed at the task level, answer never came) raises
:class:`EvaluationInfrastructureError`; it is never turned into a kernel status (DESIGN §4.10).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from fibserve.trace import Definition, EvaluationStatus, Solution, Trace
from pydantic import BaseModel, ConfigDict, Field

from .task import TaskConfig

SCHEMA_VERSION = "ptxbench.eval/1"
"""Version tag of :class:`EvaluationReport` JSON; bump when a field changes meaning."""


class EvaluationInfrastructureError(RuntimeError):
    """The evaluation service failed (unreachable, task-level failure, no answer in time): not the kernel's fault."""


class ReportStatus(StrEnum):
    """Overall verdict on one candidate. Kernel outcomes reuse the FlashInfer Trace vocabulary."""

    PASSED = "PASSED"
    """Every workload PASSED (on a GPU or, for Triton without one, on the interpreter)."""
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    NOT_EXECUTED = "NOT_EXECUTED"
    """Built and analysed statically only (a CUDA kernel without a GPU); correctness unknown."""
    SANITIZER_FAILED = "SANITIZER_FAILED"
    """compute-sanitizer reported an error; the kernel was not evaluated further."""
    INFRASTRUCTURE_ERROR = "INFRASTRUCTURE_ERROR"
    """The service failed; says nothing about the kernel."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="strings")


class WorkloadResult(_Model):
    """The outcome on one workload, flattened from its trace for feedback and tables."""

    workload_uuid: str
    axes: dict[str, int] = Field(default_factory=dict)
    """Var-axis values of the workload (elements)."""
    status: EvaluationStatus
    hardware: str = ""
    """Where it ran, e.g. ``NVIDIA H200`` or ``cpu``."""
    executed_on_gpu: bool = False
    """Whether the timing comes from a GPU (False on the Triton interpreter)."""
    latency_ms: float | None = None
    """Candidate median latency (ms), PASSED only."""
    reference_latency_ms: float | None = None
    """Reference median latency (ms), PASSED only."""
    speedup: float | None = None
    """Reference / candidate latency (x), PASSED only."""
    max_absolute_error: float | None = None
    max_relative_error: float | None = None
    log: str = ""
    """Error text from the evaluator (compile log, traceback), as the service sent it."""


class StaticAnalysis(_Model):
    """What the build and the static checks found (PTX/SASS instruction families, ptxas resources, policy)."""

    compiled: bool | None = None
    """Whether the build succeeded (None when the service did not say)."""
    compile_log: str = ""
    policy_violations: list[str] = Field(default_factory=list)
    """Source-policy findings (e.g. a cuBLAS call); any finding rejects the kernel."""
    ptx_families: list[str] = Field(default_factory=list)
    """Instruction families in the PTX, e.g. ``wgmma``, ``cp.async.bulk.tensor``, ``mbarrier``."""
    sass_families: list[str] = Field(default_factory=list)
    """Instruction families in the SASS, e.g. ``HGMMA``, ``UTMALDG``."""
    registers: int | None = None
    """Registers per thread (max over kernels)."""
    shared_memory_bytes: int | None = None
    """Static shared memory per block (bytes, max over kernels)."""
    spill_bytes: int | None = None
    """Spill stores plus spill loads (bytes, sum over kernels)."""
    raw: dict[str, Any] = Field(default_factory=dict)
    """The service's analysis object as sent."""


class SanitizerVerdict(_Model):
    """Result of the optional compute-sanitizer gate."""

    passed: bool
    tools: list[str] = Field(default_factory=list)
    summary: str = ""
    """The first failing run's report (or empty when clean)."""


class EvaluationReport(_Model):
    """Versioned result of evaluating one candidate for one task (``ptxbench eval --json`` prints this)."""

    schema_version: Literal["ptxbench.eval/1"] = SCHEMA_VERSION
    status: ReportStatus
    definition: str
    language: str
    solution_name: str = ""
    all_passed: bool = False
    """Every requested workload PASSED."""
    min_speedup: float | None = None
    """Minimum speedup over workloads (x); set only when all passed."""
    target_speedup: float
    target_met: bool = False
    """All passed, all timed on a GPU, and ``min_speedup >= target_speedup``. Never true without a GPU."""
    executed_on_gpu: bool = False
    """Every workload ran on a GPU."""
    workloads: list[WorkloadResult] = Field(default_factory=list)
    traces: list[Trace] = Field(default_factory=list)
    """The FlashInfer Trace of each workload, as the service returned them."""
    static_analysis: StaticAnalysis | None = None
    sanitizer: SanitizerVerdict | None = None
    """None when the sanitizer gate was off."""
    notes: str = ""
    """Service notes for people (e.g. why a CUDA kernel was not executed)."""
    error: str | None = None
    """The infrastructure error message (status INFRASTRUCTURE_ERROR only)."""


@runtime_checkable
class EvaluationBackend(Protocol):
    """Where kernels are evaluated. Implementations raise :class:`EvaluationInfrastructureError` on service failure."""

    def definition(self, name: str) -> Definition:
        """The definition ``name``."""
        ...

    def evaluate(self, solution: Solution, task: TaskConfig) -> EvaluationReport:
        """Evaluate ``solution`` on the task's workloads (with the sanitizer gate when the task asks)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record about the backend in a trajectory (never a token)."""
        ...


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def executed_on_gpu(trace: Trace) -> bool:
    """Whether a trace's evaluation ran on a GPU, from its ``environment.hardware`` (``cpu`` means the interpreter)."""
    if trace.evaluation is None:
        return False
    hardware = trace.evaluation.environment.hardware.strip().lower()
    return not (hardware == "cpu" or hardware.startswith("cpu") or "interpret" in hardware)


def workload_result(trace: Trace) -> WorkloadResult:
    """Flatten one evaluated trace.

    Raises:
        ValueError: the trace has no evaluation.
    """
    evaluation = trace.evaluation
    if evaluation is None:
        raise ValueError(f"trace for workload {trace.workload.uuid} has no evaluation")
    perf, corr = evaluation.performance, evaluation.correctness
    return WorkloadResult(
        workload_uuid=trace.workload.uuid,
        axes=dict(trace.workload.axes),
        status=evaluation.status,
        hardware=evaluation.environment.hardware,
        executed_on_gpu=executed_on_gpu(trace),
        latency_ms=_finite(perf.latency_ms) if perf else None,
        reference_latency_ms=_finite(perf.reference_latency_ms) if perf else None,
        speedup=_finite(perf.speedup_factor) if perf else None,
        max_absolute_error=corr.max_absolute_error if corr else None,
        max_relative_error=corr.max_relative_error if corr else None,
        log=evaluation.log,
    )


def build_report(
    task: TaskConfig,
    *,
    solution_name: str,
    traces: list[Trace],
    executed: bool | None = True,
    analysis: StaticAnalysis | None = None,
    sanitizer: SanitizerVerdict | None = None,
    notes: str = "",
) -> EvaluationReport:
    """Derive the verdict fields (status, all_passed, min_speedup, target_met) from structured results.

    ``executed=False`` (CUDA without a GPU) gives ``NOT_EXECUTED`` unless the build itself failed.
    ``target_met`` requires every workload PASSED and timed on a GPU with speedup >= ``task.target_speedup``.
    """
    base = {
        "definition": task.definition,
        "language": task.language,
        "solution_name": solution_name,
        "target_speedup": task.target_speedup,
        "static_analysis": analysis,
        "sanitizer": sanitizer,
        "notes": notes,
        "traces": traces,
    }
    if sanitizer is not None and not sanitizer.passed:
        return EvaluationReport(status=ReportStatus.SANITIZER_FAILED, **base)
    results = [workload_result(t) for t in traces if t.evaluation is not None]
    failing = [r for r in results if r.status is not EvaluationStatus.PASSED]
    if failing:
        return EvaluationReport(status=ReportStatus(failing[0].status.value), workloads=results, **base)
    if analysis is not None and analysis.compiled is False:
        return EvaluationReport(status=ReportStatus.COMPILE_ERROR, workloads=results, **base)
    if executed is False or not results:
        return EvaluationReport(status=ReportStatus.NOT_EXECUTED, workloads=results, **base)
    speedups = [r.speedup for r in results]
    min_speedup = min(s for s in speedups if s is not None) if all(s is not None for s in speedups) else None
    on_gpu = all(r.executed_on_gpu for r in results)
    return EvaluationReport(
        status=ReportStatus.PASSED,
        workloads=results,
        all_passed=True,
        min_speedup=min_speedup,
        executed_on_gpu=on_gpu,
        target_met=bool(on_gpu and min_speedup is not None and min_speedup >= task.target_speedup),
        **base,
    )


def infrastructure_report(task: TaskConfig, message: str, *, solution_name: str = "") -> EvaluationReport:
    """The result when the service failed: status INFRASTRUCTURE_ERROR with the message; no kernel verdict."""
    return EvaluationReport(
        status=ReportStatus.INFRASTRUCTURE_ERROR,
        definition=task.definition,
        language=task.language,
        solution_name=solution_name,
        target_speedup=task.target_speedup,
        error=message,
    )
