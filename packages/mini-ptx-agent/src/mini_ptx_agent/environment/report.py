"""One candidate's evaluation result for a fixed task: :class:`KernelReport` and its parts, the versioned JSON
the agent writes per turn (``exp_000/evaluations/turn_NNN.json``) and `ptxbench eval --json` prints.

The status vocabulary is FlashInfer Trace's (:class:`~fibserve.trace.EvaluationStatus`) plus
:class:`NotEvaluated` for a candidate that got no complete evaluation. The models carry no I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from fibserve.trace import EvaluationStatus, Trace
from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = "ptxbench.eval.v1"
"""The schema name of :class:`KernelReport` JSON (its ``schema`` field): the name the public PTXBench
verifier accepts (it rewards a result only when ``schema`` is ``ptxbench.eval.v1`` and ``all_passed`` is true).
Bump when a field changes meaning."""

LEGACY_SCHEMA_VERSION = "ptxbench.eval/1"
"""What results said before (``schema_version: "ptxbench.eval/1"``, the same fields): still read, never written."""


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


class QuotedFinding(_Model):
    """One distinct error a compute-sanitizer run reported, as the feedback quotes it: the service's
    :class:`fibserve.api.SanitizerFinding` with its run's tool and workload, its places as text."""

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
    findings: list[QuotedFinding] = Field(default_factory=list)
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
