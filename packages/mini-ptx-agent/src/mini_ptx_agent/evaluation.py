"""Evaluation of one candidate kernel for a fixed task: the versioned result, the backend protocol, FIBServe.

The agent and `ptxbench eval` see evaluation through one small protocol, :class:`EvaluationBackend`
(``definition(name)`` and ``evaluate(solution, task)``), and one result, :class:`EvaluationReport`. The real
backend is :class:`FIBServeBackend` (the HTTP client of FIBServe). Every decision downstream (feedback verdict,
``Submitted``, exit codes) is made from the structured fields here, never from log text.

A failure of the service itself (unreachable, task failed at the task level, answer never came) raises
:class:`EvaluationInfrastructureError`; it is never turned into a kernel status (an outage is not the kernel's fault).
"""

from __future__ import annotations

import math
import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from fibserve.trace import Definition, EvaluationStatus, Solution, Trace
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    roofline_floor_ms: float | None = None
    """Set when the service flagged the timing as faster than the device's roofline allows (implausible)."""


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
    """All passed, all timed on a GPU, none implausible, and ``min_speedup >= target_speedup``. Never true
    without a GPU."""
    executed_on_gpu: bool = False
    """Every workload ran on a GPU."""
    implausible: list[str] = Field(default_factory=list)
    """Workloads whose timing the service flagged as faster than the roofline; such a result never meets the target."""
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

    def workloads(self, name: str) -> list[Any]:
        """The definition's workloads (objects with ``uuid`` and ``axes``)."""
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
    """Whether a trace's evaluation ran and was timed on a GPU.

    Decided from structured fields: ``performance.extra.measured_on`` (``gpu``/``cpu``) and ``timed`` when the
    service sets them, else ``environment.hardware`` (``cpu`` means the Triton interpreter).
    """
    evaluation = trace.evaluation
    if evaluation is None:
        return False
    extra = (evaluation.performance.extra or {}) if evaluation.performance else {}
    if extra.get("timed") is False:
        return False
    if "measured_on" in extra:
        return extra["measured_on"] == "gpu"
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
    if perf is not None and (perf.extra or {}).get("timed") is False:
        perf = None  # an untimed run (CPU mode) carries zero latencies that are not measurements
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
        roofline_floor_ms=_implausible_floor(corr.extra if corr else None),
    )


def _implausible_floor(extra: dict[str, Any] | None) -> float | None:
    """The roofline floor (ms) when ``correctness.extra.plausibility.flagged`` is true (a time below the device roofline), else None."""
    verdict = (extra or {}).get("plausibility")
    if isinstance(verdict, dict) and verdict.get("flagged"):
        floor = verdict.get("floor_ms")
        return float(floor) if isinstance(floor, int | float) else 0.0
    return None


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
    ``target_met`` requires every workload PASSED and timed on a GPU with speedup >= ``task.target_speedup``,
    and no timing flagged as faster than the roofline.
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
    implausible = [r.workload_uuid for r in results if r.roofline_floor_ms is not None]
    fast_enough = min_speedup is not None and min_speedup >= task.target_speedup
    return EvaluationReport(
        status=ReportStatus.PASSED,
        workloads=results,
        all_passed=True,
        min_speedup=min_speedup,
        executed_on_gpu=on_gpu,
        implausible=implausible,
        target_met=bool(on_gpu and fast_enough and not implausible),
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


# -- static analysis and sanitizer answers -> report fields ---------------------------------------------------


def _positive(counts: Any) -> list[str]:
    """Names with a positive count from a ``{name: count}`` mapping, sorted."""
    return sorted(k for k, v in counts.items() if v) if isinstance(counts, dict) else []


def static_analysis_from(raw: dict[str, Any] | None) -> StaticAnalysis | None:
    """Read the service's analysis (``fibserve.check``'s ``Analysis`` JSON) into :class:`StaticAnalysis`.

    ``compiled`` from ``build.ok`` (None when policy stopped the build before it started: then the violations
    say why); PTX families from ``ptx_families``; SASS families from the kernels' ``sass_notable`` opcodes
    (HGMMA, UTMALDG, ...); registers and shared memory are the maximum over kernels, spills the sum of spill
    stores and loads over kernels.
    """
    if not raw:
        return None
    build = raw.get("build") if isinstance(raw.get("build"), dict) else None
    kernels = [k for k in raw.get("kernels") or [] if isinstance(k, dict)]
    resources = [k["resources"] for k in kernels if isinstance(k.get("resources"), dict)]
    sass: set[str] = set()
    for kernel in kernels:
        sass.update(_positive(kernel.get("sass_notable")))
    regs = [r["registers"] for r in resources if isinstance(r.get("registers"), int)]
    smem = [r["shared_bytes"] for r in resources if isinstance(r.get("shared_bytes"), int)]
    violations = [
        f"{v.get('file')}:{v.get('line')}: {v.get('message')} ({v.get('rule')})"
        if isinstance(v, dict)
        else str(v)
        for v in raw.get("policy") or []
    ]
    abi = [str(problem) for problem in raw.get("abi") or []]
    compiled = build.get("ok") if build is not None else (False if violations else None)
    return StaticAnalysis(
        compiled=compiled if isinstance(compiled, bool) else None,
        compile_log=str(build.get("log") or "") if build is not None else "",
        policy_violations=violations + abi,
        ptx_families=_positive(raw.get("ptx_families")),
        sass_families=sorted(sass),
        registers=max(regs) if regs else None,
        shared_memory_bytes=max(smem) if smem else None,
        spill_bytes=sum(
            int(r.get("spill_store_bytes") or 0) + int(r.get("spill_load_bytes") or 0) for r in resources
        )
        if resources
        else None,
        raw=raw,
    )


def sanitizer_verdict_from(runs: list[Any]) -> SanitizerVerdict:
    """Summarize compute-sanitizer runs (one per tool and workload): passed when every run passed."""
    rows = [r.model_dump() if hasattr(r, "model_dump") else dict(r) for r in runs]
    failed = [r for r in rows if not r.get("passed")]
    summary = ""
    if failed:
        first = failed[0]
        why = "timed out" if first.get("timed_out") else f"exit {first.get('exit_code')}"
        summary = (
            f"{first.get('tool')} on workload {first.get('workload')} ({why}):\n{first.get('output', '')}"
        )
    return SanitizerVerdict(
        passed=not failed, tools=sorted({str(r.get("tool")) for r in rows}), summary=summary
    )


# -- the real backend: FIBServe over HTTP ---------------------------------------------------------------------


class UnknownDefinition(LookupError):
    """The service has no definition of that name (a mistake in the task, not an infrastructure failure)."""


class FIBServeBackend:
    """:class:`EvaluationBackend` over :class:`fibserve.client.FIBServeClient`.

    One evaluation = optional ``POST /sanitize`` (the gate: any finding rejects the kernel before timing), then
    ``POST /evaluate`` on the task's workloads, each waited for up to ``task.timeout_s`` plus ``wait_margin_s``.
    An unreachable service, an error answer, a task that ``failed`` at the task level, or a wait that ran out
    raise :class:`EvaluationInfrastructureError`; an unknown definition raises :class:`UnknownDefinition`.
    """

    def __init__(
        self, url: str, *, token: str | None = None, wait_margin_s: float = 60.0, reconnect_s: float = 30.0
    ):
        """``reconnect_s``: how long an unreachable service is retried while waiting for a task (s)."""
        from fibserve.client import FIBServeClient

        self.url = url.rstrip("/")
        self.client = FIBServeClient(self.url, token=token)
        self.wait_margin_s = wait_margin_s
        self.reconnect_s = reconnect_s

    def describe(self) -> dict[str, Any]:
        return {"backend": "fibserve", "url": self.url}

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from fibserve.client import APIError, FIBServeError

        try:
            return fn(*args, **kwargs)
        except APIError as exc:
            if exc.status_code == 404 and exc.code == "unknown_definition":
                raise UnknownDefinition(exc.message) from exc
            raise EvaluationInfrastructureError(f"FIBServe at {self.url} refused {what}: {exc}") from exc
        except FIBServeError as exc:  # ServiceUnreachable, TaskWaitTimeout
            raise EvaluationInfrastructureError(f"{what}: {exc}") from exc
        except ValidationError as exc:  # an answer this client cannot read: client and server versions differ
            raise EvaluationInfrastructureError(
                f"FIBServe at {self.url} sent an answer to {what} that this client cannot read "
                f"(are client and server the same version?): {exc.error_count()} validation error(s), "
                f"first: {exc.errors()[0]['msg']}"
            ) from exc

    def definition(self, name: str) -> Definition:
        """``GET /definitions/{name}``."""
        return self._call(f"GET /definitions/{name}", self.client.definition, name)

    def workloads(self, name: str) -> list[Any]:
        """``GET /definitions/{name}/workloads``."""
        return list(self._call(f"GET /definitions/{name}/workloads", self.client.workloads, name))

    def _finished(self, what: str, task_id: str, timeout_s: float) -> Any:
        answer = self._call(
            f"waiting for {what} task {task_id}",
            self.client.wait,
            task_id,
            timeout_s,
            reconnect_s=self.reconnect_s,
        )
        if answer.status == "failed":
            error = answer.error
            detail = f"{error.code}: {error.message}" if error else "no reason given"
            raise EvaluationInfrastructureError(
                f"FIBServe {what} task {task_id} failed at the task level ({detail})"
            )
        return answer

    def evaluate(self, solution: Solution, task: TaskConfig) -> EvaluationReport:
        """Sanitizer gate (when ``task.sanitizer``), then evaluation on ``task.workload_uuids``."""
        wait_s = task.timeout_s + self.wait_margin_s
        sanitizer = None
        if task.sanitizer:
            task_id = self._call(
                "POST /sanitize",
                self.client.submit_sanitize,
                solution,
                task.workload_uuids,
                sanitizer_types=task.sanitizer_types,
                timeout=task.timeout_s,
            )
            answer = self._finished("sanitize", task_id, wait_s)
            sanitizer = sanitizer_verdict_from(answer.sanitizer or [])
            if not sanitizer.passed:
                return build_report(task, solution_name=answer.solution, traces=[], sanitizer=sanitizer)
        task_id = self._call(
            "POST /evaluate",
            self.client.submit_evaluate,
            solution,
            task.workload_uuids,
            timeout=task.timeout_s,
            atol=task.atol,
            rtol=task.rtol,
        )
        answer = self._finished("evaluate", task_id, wait_s)
        return build_report(
            task,
            solution_name=answer.solution,
            traces=list(answer.traces or []),
            executed=answer.executed,
            analysis=static_analysis_from(answer.analysis),
            sanitizer=sanitizer,
            notes=answer.logs or "",
        )


# -- `ptxbench eval` --------------------------------------------------------------------------------------------


def evaluate_kernel(
    kernel_path: Path,
    task: TaskConfig,
    *,
    service_url: str | None = None,
    token: str | None = None,
    log_path: Path | None = None,
) -> EvaluationReport:
    """Evaluate the kernel file ``kernel_path`` for ``task`` (the library function behind `ptxbench eval`).

    The service is ``service_url``, else ``$SERVICE_URL``, else an embedded FIBServe started for this call
    (its log goes to ``log_path`` when given). ``token`` defaults to ``$FIBSERVE_TOKEN`` for a remote service.
    A service failure is returned as status INFRASTRUCTURE_ERROR, never raised and never a kernel verdict.

    Raises:
        OSError: the kernel file cannot be read.
        TaskConfigError: the file's suffix does not fit the task's language (a ``.py`` file for a CUDA task).
    """
    from .service import ServiceStartError
    from .service import service_url as resolve_service
    from .task import KERNEL_SUFFIXES, TaskConfigError

    suffixes = KERNEL_SUFFIXES[task.language]
    if Path(kernel_path).suffix not in suffixes:
        raise TaskConfigError(
            f"{Path(kernel_path).name} does not look like a {task.language} kernel (expected {', '.join(suffixes)}); "
            f'pass the matching file, or set "language" in the task config'
        )
    source = Path(kernel_path).read_text(encoding="utf-8")
    solution = task.solution(source, name=f"ptxbench-eval-{Path(kernel_path).stem}", author="ptxbench-eval")
    try:
        with resolve_service(service_url, log_path=log_path) as (url, embedded):
            auth = None if embedded else (token or os.environ.get("FIBSERVE_TOKEN") or None)
            return FIBServeBackend(url, token=auth).evaluate(solution, task)
    except (EvaluationInfrastructureError, ServiceStartError) as exc:
        return infrastructure_report(task, str(exc), solution_name=solution.name)
