"""Evaluation of one candidate kernel for a fixed task: the versioned result, the backend protocol, FIBServe.

The agent and `ptxbench eval` see evaluation through one small protocol, :class:`EvaluationBackend`
(``definition(name)`` and ``evaluate(solution, task)``), and one result, :class:`KernelReport`. The real
backend is :class:`~mini_ptx_agent.fibserve_backend.FIBServeBackend`. Every decision downstream (feedback verdict,
``Submitted``, exit codes) is made from the structured fields here, never from log text.

A failure of the service itself (unreachable, task failed at the task level, answer never came) raises
:class:`EvaluationInfrastructureError`; it is never turned into a kernel status (an outage is not the kernel's fault).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from fibserve.trace import (
    Comparisons,
    Correctness,
    CorrectnessFacts,
    Definition,
    EvaluationStatus,
    Solution,
    TimingFacts,
    Trace,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .architecture import has_target_families
from .feedback_options import FeedbackOptions
from .task import TaskConfig

SCHEMA_VERSION = "ptxbench.eval.v1"
"""The schema name of :class:`KernelReport` JSON (its ``schema`` field): the name the public PTXBench
verifier accepts (it rewards a result only when ``schema`` is ``ptxbench.eval.v1`` and ``all_passed`` is true).
Bump when a field changes meaning."""

LEGACY_SCHEMA_VERSION = "ptxbench.eval/1"
"""What results said before (``schema_version: "ptxbench.eval/1"``, the same fields): still read, never written."""


class EvaluationInfrastructureError(RuntimeError):
    """The evaluation service failed (unreachable, task-level failure, no answer in time): not the kernel's fault."""


class NotEvaluated(StrEnum):
    """The outcomes of a candidate that got no complete evaluation, for which the FlashInfer Trace vocabulary
    (:class:`~fibserve.trace.EvaluationStatus`) has no word. Every other outcome is an ``EvaluationStatus``."""

    NOT_EXECUTED = "NOT_EXECUTED"
    """Built and analysed statically only (a CUDA kernel without a GPU); correctness unknown."""
    SANITIZER_FAILED = "SANITIZER_FAILED"
    """compute-sanitizer reported an error; the kernel was not evaluated further."""
    INFRASTRUCTURE_ERROR = "INFRASTRUCTURE_ERROR"
    """The service failed; says nothing about the kernel."""


KernelStatus = EvaluationStatus | NotEvaluated
"""Overall verdict on one candidate: PASSED when every workload PASSED (on a GPU or, for Triton without one, on
the interpreter), else the first failing workload's status or COMPILE_ERROR, else a :class:`NotEvaluated`."""


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
    """Comparator / candidate latency (x), PASSED only: against the baseline Solution when ``speedup_basis``
    is ``baseline`` (targets are judged on it), else against the definition's reference."""
    speedup_basis: Literal["baseline", "reference"] | None = None
    """What ``speedup`` and ``reference_latency_ms`` are against (None: the service did not say)."""
    baseline: str | None = None
    """The baseline Solution's name, when the speedup is against one."""
    baseline_description: str = ""
    """What the baseline runs and its caveats (e.g. the FP8 baseline runs at bf16 speed)."""
    speedup_vs_reference: float | None = None
    """Reference / candidate latency (x) when the reference was timed too."""
    reference_not_timed: str | None = None
    """Why the reference was not timed, or only sampled."""
    roofline_fraction: float | None = None
    """The roofline floor over the candidate's latency (1.0 at the device's roofline)."""
    roofline_device: str | None = None
    """The device model of the roofline, e.g. ``H200``."""
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
    target: str | None = None
    """The build's target architecture (``sm_90a``, ``sm_100a``); None for Triton and Python."""
    architecture_families: list[str] | None = None
    """The target families the service's architecture verdict found (``wgmma``, ``TMA``, ``tcgen05``; see
    :mod:`mini_ptx_agent.architecture`); None when there was no verdict (nothing compiled, or Triton)."""
    raw: dict[str, Any] = Field(default_factory=dict)
    """The service's analysis object as sent."""


class SanitizerFinding(_Model):
    """One distinct error a compute-sanitizer run reported, flattened for feedback."""

    tool: str
    workload: str
    message: str
    """The tool's headline, e.g. ``Invalid __global__ write of size 4 bytes``."""
    count: int = 1
    """Identical reports (other threads) counted into this one."""
    places: list[str] = Field(default_factory=list)
    """``kernel.cu:17 (vector_add_kernel): z[i] = x[i] + y[i];``: each source line the finding names, quoted."""
    thread: str | None = None
    """The first reporting thread and block."""
    details: list[str] = Field(default_factory=list)
    """Address and allocation lines of the first report."""


class SanitizerVerdict(_Model):
    """Result of the optional compute-sanitizer gate."""

    passed: bool
    """No run found anything (the public result's ``sanitizer.clean``)."""
    tools: list[str] = Field(default_factory=list)
    requested_runs: int = 1
    """How many times the gate was asked to run (the task's ``sanitizer_runs``)."""
    completed_runs: int = 1
    """How many runs it made: fewer than requested when one found an error."""
    summary: str = ""
    """The first failing run's report (or empty when clean)."""
    findings: list[SanitizerFinding] = Field(default_factory=list)
    """The errors of every failing run, with the source lines they name."""


class NcuResult(_Model):
    """What one Nsight Compute run of a correct kernel showed (``instruction_evidence``, ``profile_in_loop``)."""

    workload: str
    """The workload profiled: the one with the lowest speedup."""
    kernel_hash: str
    """sha256 of the solution's sources, entry point, target and the workload: the cache key."""
    cached: bool = False
    """Read from the run's cache (``exp_000/ncu/<kernel_hash>.json``) instead of profiled again."""
    hardware: str | None = None
    error: str | None = None
    """Why the kernel could not be profiled (it failed under ncu, no kernel ran); None when it was."""
    executed_opcodes: dict[str, int] = Field(default_factory=dict)
    """Warp-level instructions executed per base SASS opcode (``sass__inst_executed_per_opcode``)."""
    executed_families: list[str] = Field(default_factory=list)
    """The target families those opcodes prove (``wgmma``, ``TMA``, ``tcgen05``; :mod:`mini_ptx_agent.architecture`)."""
    not_compiled: list[str] = Field(default_factory=list)
    """Notable opcodes the counts claim that the compiled SASS (the trusted static analysis) does not have: left
    out of ``executed_opcodes`` and ``executed_families`` (the candidate shares ncu's output, so such a claim is
    forged or misread)."""
    summary: dict[str, Any] | None = None
    """The short summary of the longest kernel (``profile_in_loop``), the service's ``NcuSummary`` as it sent it:
    ``kernel``, ``sol_compute_pct``, ``sol_memory_pct``, ``achieved_occupancy_pct``,
    ``theoretical_occupancy_pct`` (%), ``top_stalls`` (``[reason, warps stalled per issued instruction]``)."""

    @property
    def sass_families(self) -> list[str]:
        """The notable opcodes that executed (``HGMMA``, ``UTMALDG``, ``SYNCS``, ``UTC*``...), sorted: the same
        rule as the static analysis's :attr:`StaticAnalysis.sass_families` (fibserve's ``SASS_NOTABLE``)."""
        from fibserve.analysis.families import SASS_NOTABLE

        return sorted(
            op
            for op, n in self.executed_opcodes.items()
            if n > 0 and (op in SASS_NOTABLE or op.startswith("UTC"))
        )


class FixNote(_Model):
    """A fix note the BM25 search found for a failure (``notes_dir``)."""

    name: str
    """File name of the note."""
    title: str
    text: str
    """The note's body (bounded)."""
    score: float
    """BM25 score against the failure's text."""


class KernelReport(_Model):
    """Versioned result of evaluating one candidate for one task (``ptxbench eval --json`` prints this).

    Its JSON carries ``schema: "ptxbench.eval.v1"``; a result written as ``schema_version: "ptxbench.eval/1"``
    (before the rename) reads as the same thing.
    """

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True, validate_by_alias=True)

    schema_name: Literal["ptxbench.eval.v1"] = Field(default=SCHEMA_VERSION, alias="schema")
    """``ptxbench.eval.v1`` (JSON key ``schema``)."""
    status: KernelStatus
    definition: str
    language: str
    task_id: str | None = None
    """The task's ``task_id``, when the task file has one."""
    kernel_sha256: str | None = None
    """sha256 (hex) of the kernel file's text as UTF-8 (``ptxbench eval``), None for an agent's turn."""
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
    ncu: NcuResult | None = None
    """The Nsight Compute run of a correct kernel, when ``instruction_evidence`` or ``profile_in_loop`` is on."""
    fix_notes: list[FixNote] = Field(default_factory=list)
    """Fix notes found for a failure, when ``notes_dir`` is set."""
    notes: str = ""
    """Service notes for people (e.g. why a CUDA kernel was not executed)."""
    error: str | None = None
    """The infrastructure error message (status INFRASTRUCTURE_ERROR only)."""
    limits_hit: dict[str, str] = Field(default_factory=dict)
    """Workload uuid -> the sandbox's resource limit the candidate ran into there (``limit exceeded: memory
    (...)``), as the service reported it (``TaskAnswer.limits_hit``)."""

    @model_validator(mode="before")
    @classmethod
    def _read_legacy_schema(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema_version") == LEGACY_SCHEMA_VERSION:
            data = {k: v for k, v in data.items() if k != "schema_version"}
            data.setdefault("schema", SCHEMA_VERSION)
        return data


@runtime_checkable
class EvaluationBackend(Protocol):
    """Where kernels are evaluated. Implementations raise :class:`EvaluationInfrastructureError` on service failure."""

    def definition(self, name: str) -> Definition:
        """The definition ``name``."""
        ...

    def workloads(self, name: str) -> list[Any]:
        """The definition's workloads (objects with ``uuid`` and ``axes``)."""
        ...

    def evaluate(self, solution: Solution, task: TaskConfig) -> KernelReport:
        """Evaluate ``solution`` on the task's workloads (with the sanitizer gate when the task asks)."""
        ...

    def profile(self, solution: Solution, task: TaskConfig, workload: str, kernel_hash: str) -> NcuResult:
        """Profile ``solution`` on ``workload`` with Nsight Compute (executed opcodes and a summary). Called
        only when a run's feedback options ask for it, so a backend without a profiler need not have it."""
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


# -- static analysis and sanitizer answers -> report fields ---------------------------------------------------


def _positive(counts: dict[str, int]) -> list[str]:
    """Names with a positive count, sorted."""
    return sorted(name for name, count in counts.items() if count)


def static_analysis_from(raw: Any) -> StaticAnalysis | None:
    """Read the service's static analysis into :class:`StaticAnalysis`: the one place the agent reads it.

    ``raw`` is a task answer's ``analysis`` (already a :class:`fibserve.analysis.report.Analysis`), or its JSON
    as ``fibserve.check`` writes it, validated against that model, so the agent reads the fields the service
    wrote by their types, and a change to the model shows here. ``compiled`` from ``build.ok`` (None when policy stopped the build before it
    started: then the violations say why); PTX families from ``ptx_families``; SASS families from the kernels'
    ``sass_notable`` opcodes (HGMMA, UTMALDG, ...); registers and shared memory are the maximum over kernels,
    spills the sum of spill stores and loads over kernels. The service's
    :class:`fibserve.analysis.report.AnalysisUnavailable` (``{"error": ...}``: its analysis failed), or anything
    neither model accepts, gives a :class:`StaticAnalysis` that knows nothing but ``raw``.
    """
    if not raw:
        return None
    # builds on fibserve.build and .analysis: only once it is needed
    from fibserve.analysis.report import AnalysisUnavailable, read_analysis

    if hasattr(raw, "model_dump"):
        raw = raw.model_dump(mode="json")
    try:
        analysis = read_analysis(raw)
    except ValidationError:
        return StaticAnalysis(raw=raw)
    if analysis is None or isinstance(analysis, AnalysisUnavailable):
        return StaticAnalysis(raw=raw)
    resources = [kernel.resources for kernel in analysis.kernels if kernel.resources is not None]
    violations = [f"{v.file}:{v.line}: {v.message} ({v.rule})" for v in analysis.policy]
    if analysis.build is not None:
        compiled: bool | None = analysis.build.ok
    else:
        compiled = False if violations else None
    registers = [r.registers for r in resources if r.registers is not None]
    from .architecture import verdict_families

    return StaticAnalysis(
        compiled=compiled,
        compile_log=analysis.build.log if analysis.build is not None else "",
        policy_violations=violations + list(analysis.abi),
        ptx_families=_positive(analysis.ptx_families),
        sass_families=sorted(
            {name for kernel in analysis.kernels for name in _positive(kernel.sass_notable)}
        ),
        registers=max(registers) if registers else None,
        shared_memory_bytes=max(r.shared_bytes for r in resources) if resources else None,
        spill_bytes=sum(r.spill_store_bytes + r.spill_load_bytes for r in resources) if resources else None,
        target=analysis.arch,
        architecture_families=verdict_families(analysis.verdict) if analysis.verdict is not None else None,
        raw=raw,
    )


def _places(finding: dict[str, Any]) -> list[str]:
    places = []
    for where in finding.get("locations") or []:
        text = f"{where.get('file')}:{where.get('line')}"
        if where.get("function"):
            text += f" ({where['function']})"
        if where.get("source"):
            text += f": {where['source']}"
        places.append(text)
    return places


def sanitizer_verdict_from(
    runs: list[Any], *, requested_runs: int = 1, completed_runs: int = 1
) -> SanitizerVerdict:
    """Summarize compute-sanitizer runs (one per tool and workload): passed when every run passed; the findings
    of the failing runs flattened with their source lines (:class:`SanitizerFinding`). ``requested_runs`` and
    ``completed_runs`` count the gate's rounds (each round runs every tool on every workload)."""
    rows = [r.model_dump() if hasattr(r, "model_dump") else dict(r) for r in runs]
    failed = [r for r in rows if not r.get("passed")]
    findings = [
        SanitizerFinding(
            tool=str(run.get("tool")), workload=str(run.get("workload")), message=str(f.get("message", "")),
            count=int(f.get("count") or 1), places=_places(f), thread=f.get("thread"),
            details=[str(d) for d in f.get("details") or []],
        )
        for run in failed
        for f in run.get("findings") or []
    ]  # fmt: skip
    summary = ""
    if failed:
        first = failed[0]
        why = "timed out" if first.get("timed_out") else f"exit {first.get('exit_code')}"
        summary = (
            f"{first.get('tool')} on workload {first.get('workload')} ({why}):\n{first.get('output', '')}"
        )
    return SanitizerVerdict(
        passed=not failed,
        tools=sorted({str(r.get("tool")) for r in rows}),
        requested_runs=requested_runs,
        completed_runs=completed_runs,
        summary=summary,
        findings=findings,
    )


def ncu_result_from(run: Any, *, workload: str, kernel_hash: str, target: str) -> NcuResult:
    """Read one ``digest`` Nsight Compute run (the service's ``ProfileRun`` or its JSON) into :class:`NcuResult`;
    the executed families follow from its opcode counts (:func:`mini_ptx_agent.architecture.executed_families`)."""
    from .architecture import executed_families

    row = run.model_dump() if hasattr(run, "model_dump") else dict(run)
    if not row.get("ok"):
        note = row.get("note") or f"ncu exited with status {row.get('exit_code')}"
        return NcuResult(workload=workload, kernel_hash=kernel_hash, error=str(note))
    opcodes = {str(k): int(v) for k, v in (row.get("executed_opcodes") or {}).items()}
    summary = row.get("summary")
    return NcuResult(
        workload=workload,
        kernel_hash=kernel_hash,
        executed_opcodes=opcodes,
        executed_families=executed_families(target, opcodes),
        summary=dict(summary) if summary else None,
    )


# -- the stop decision ------------------------------------------------------------------------------------


def shown_families(report: KernelReport, *, executed: bool) -> list[str] | None:
    """The kernel's target families: the executed ones (``executed``: from its Nsight Compute run) or the
    compiled ones (the static analysis); None when unknown (no analysis verdict, no successful profile)."""
    if executed:
        ncu = report.ncu
        return None if ncu is None or ncu.error else list(ncu.executed_families)
    analysis = report.static_analysis
    return None if analysis is None else analysis.architecture_families


def architecture_met(report: KernelReport, options: FeedbackOptions, target: str) -> bool:
    """Whether the kernel has the families ``target`` calls for, as ``options`` judge it (executed families with
    ``instruction_evidence``, else compiled ones). Unknown counts as not met: a Triton kernel has no static
    verdict (its SASS is compiled at run time), so only its executed instructions can show the families."""
    families = shown_families(report, executed=options.instruction_evidence)
    return families is not None and has_target_families(target, families)


def submits(report: KernelReport, options: FeedbackOptions, target: str) -> bool:
    """Whether the run ends ``Submitted``: the target speedup is met, and with ``require_architecture`` the
    families ``target`` (the task's architecture) calls for too."""
    return report.target_met and (
        not options.require_architecture or architecture_met(report, options, target)
    )
