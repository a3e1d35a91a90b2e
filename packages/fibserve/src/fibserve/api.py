"""The wire contract of FIBServe: request and answer bodies of the HTTP API, as pydantic v2 models (the
OpenAPI schemas at ``/docs``).

The server (:mod:`fibserve.serve`) validates requests and builds answers with them; the client
(:mod:`fibserve.client`) and the agent parse answers with them. This module imports only data models (the
trace format, the evaluation config, the report's device and build facts, the static analysis, the tools'
results), never the server, the builders or the evaluator, so a client loads none of them
(``tests/test_layers.py`` checks what ``import fibserve.client`` loads). Request models forbid unknown fields,
so a misspelt option (``atoll``) is a 422 that names it instead of a silently ignored tolerance.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fibserve.analysis.report import AnalysisOutcome
from fibserve.bench.config import EvalConfig
from fibserve.bench.report import BuildSummary, DeviceInfo
from fibserve.tools.results import (
    NcuSummary,
    ProfileRun,
    SanitizerFinding,
    SanitizerRun,
    SanitizerTool,
    SourceLocation,
)
from fibserve.trace import Solution, Trace

# -- names --------------------------------------------------------------------------------------------------

_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]+")

MAX_SOLUTION_NAME = 128
"""Longest normalized solution name (characters)."""


def normalize_solution_name(name: str) -> str:
    """The solution name the server records: safe as a file name and in a trace.

    Runs of characters outside ``[A-Za-z0-9_.-]`` become one ``_``; leading and trailing ``._-`` are
    stripped; the result is cut to ``MAX_SOLUTION_NAME`` characters; an empty result becomes ``solution``.
    Example: ``"My kernel / v2"`` -> ``"My_kernel_v2"``.
    """
    cleaned = _UNSAFE_NAME_CHARS.sub("_", name).strip("._-")[:MAX_SOLUTION_NAME].rstrip("._-")
    return cleaned or "solution"


# Names of ncu sections, metrics and sets as NVIDIA writes them (SpeedOfLight, sm__inst_executed.sum,
# dram__bytes_read.sum.per_second, regex:sm__.*). Nothing that a shell or ncu could read as an option.
_NCU_NAME = re.compile(r"^(regex:)?[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,199}$")

NcuPage = Literal["details", "raw", "source", "session"]
"""Pages of ``ncu --page``."""

Timeout = Annotated[float, Field(gt=0, le=3600)]
"""A time limit in seconds (0 < t <= 3600)."""


def _check_ncu_names(values: list[str], what: str) -> list[str]:
    for value in values:
        if not _NCU_NAME.match(value):
            raise ValueError(
                f"{what} {value!r} is not a valid Nsight Compute name: use letters, digits and '_.:-' "
                "(optionally prefixed by 'regex:'), at most 200 characters, not starting with '-'"
            )
    return values


# -- requests -----------------------------------------------------------------------------------------------


MAX_SOURCES_PER_REQUEST = 10_000
"""Most source files any request may carry, counted before they are validated one by one (300,000 sources took
9 s to validate on a loaded 2-core machine, blocking the server); each server's own, lower, limit is
``ServeSettings.max_sources``."""


def _count_sources_first(solution: Any) -> Any:
    """Refuse a raw solution with more than ``MAX_SOURCES_PER_REQUEST`` sources before validating any."""
    sources = solution.get("sources") if isinstance(solution, dict) else None
    if isinstance(sources, list) and len(sources) > MAX_SOURCES_PER_REQUEST:
        raise ValueError(
            f"sources holds {len(sources)} files; a request may carry at most {MAX_SOURCES_PER_REQUEST} "
            "(and this server's --max-sources may be lower)"
        )
    return solution


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


MAX_BATCH = 1000
"""Most candidates in one ``POST /evaluate/batch`` and most task ids in one ``POST /tasks/batch``."""


class _Candidate(_Request):
    solution: Solution
    """The candidate: FlashInfer Trace solution JSON (sources inline, relative paths only)."""
    _sources_counted = field_validator("solution", mode="before")(_count_sources_first)


class _Workloads(_Request):
    workload_uuids: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, max_length=10_000
    )
    """Workloads to run, all of the definition's workloads when absent."""
    timeout: Timeout | None = None
    """Time limit in seconds: for /evaluate, of each correctness and timing phase of a workload (it
    overrides ``timeouts.correctness`` and ``timeouts.timing`` of the evaluation config); for /sanitize and
    /profile, of each tool run. The server's default when absent."""


# The bases are listed last-field-first: pydantic orders fields from the last base to the first.
class _SolutionRequest(_Workloads, _Candidate):
    """A candidate and the workloads to run it on."""


class _Tolerances(_Request):
    atol: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Absolute tolerance (finite, >= 0); overrides the definition's and op type's (precedence:
    defaults < op type < definition < request). A server started with ``--locked-tolerances`` refuses it (403 ``tolerances_locked``)."""
    rtol: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Relative tolerance (finite, >= 0); overrides the definition's and op type's. Refused like ``atol`` by a
    server with locked tolerances."""
    profile_baseline: bool = False
    """Accepted for compatibility with older clients. The reference is always timed interleaved with the
    candidate, in pairs, so there is no separate baseline to profile."""


class EvaluateRequest(_Tolerances, _SolutionRequest):
    """Body of ``POST /evaluate``: check, build, run and time a solution against its definition's reference."""


def _count_each_candidates_sources(solutions: Any) -> Any:
    """:func:`_count_sources_first` for every candidate of a batch."""
    if isinstance(solutions, list):
        for solution in solutions:
            _count_sources_first(solution)
    return solutions


class _Candidates(_Request):
    solutions: list[Solution] = Field(min_length=1, max_length=MAX_BATCH)
    """The candidates, all for one definition (FlashInfer Trace solution JSON each); at most ``MAX_BATCH``."""
    _sources_counted = field_validator("solutions", mode="before")(_count_each_candidates_sources)


class EvaluateBatchRequest(_Tolerances, _Workloads, _Candidates):
    """Body of ``POST /evaluate/batch``: many candidates for one definition, one evaluation task each, with the
    options of ``POST /evaluate`` applied to every one (an RL step's group of samples, say)."""

    def requests(self) -> list[EvaluateRequest]:
        """One ``POST /evaluate`` body per candidate, in the order given."""
        options = self.model_dump(exclude={"solutions"})
        return [EvaluateRequest.model_validate({"solution": s, **options}) for s in self.solutions]


class SanitizeRequest(_SolutionRequest):
    """Body of ``POST /sanitize``: run the candidate once per workload under compute-sanitizer."""

    sanitizer_types: list[SanitizerTool] = Field(
        default_factory=lambda: ["memcheck"], min_length=1, max_length=4
    )
    """Tools to run, each as its own process (memcheck by default)."""


class ProfileRequest(_SolutionRequest):
    """Body of ``POST /profile``: one warm-up and one measured call under Nsight Compute (ncu)."""

    set: str | None = None
    """``ncu --set`` (e.g. ``basic``, ``detailed``, ``full``); ncu's default set when absent."""
    sections: list[str] = Field(default_factory=list, max_length=50)
    """``ncu --section`` names, e.g. ``SpeedOfLight``, ``MemoryWorkloadAnalysis``."""
    metrics: list[str] = Field(default_factory=list, max_length=200)
    """``ncu --metrics`` names, e.g. ``sm__inst_executed.sum``."""
    page: NcuPage = "details"
    """``ncu --page`` of the printed report."""
    digest: bool = False
    """Also collect executed instructions per SASS opcode and a short summary (SOL %, occupancy, stall
    reasons) into each run's ``executed_opcodes`` and ``summary`` (:mod:`fibserve.tools.ncu_digest`); the
    report is then ncu's raw page as CSV, whatever ``page`` says."""

    @field_validator("sections", "metrics")
    @classmethod
    def _safe_names(cls, values: list[str], info: Any) -> list[str]:
        return _check_ncu_names(values, info.field_name.rstrip("s"))

    @field_validator("set")
    @classmethod
    def _safe_set(cls, value: str | None) -> str | None:
        if value is not None:
            _check_ncu_names([value], "set")
        return value


class CompileRequest(_Request):
    """Body of ``POST /compile``: static analysis only, answered synchronously, needs no GPU."""

    solution: Solution
    """The candidate."""
    _sources_counted = field_validator("solution", mode="before")(_count_sources_first)
    arch: Literal["sm_90a", "sm_100a"] = "sm_90a"
    """Target architecture of the build and of the instruction-family checks."""


class BatchRequest(_Request):
    """Body of ``POST /tasks/batch``: wait for several tasks at once."""

    task_ids: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        min_length=1, max_length=MAX_BATCH
    )
    """Task ids; the answer keeps this order."""
    timeout: float = Field(default=0.0, ge=0, le=600)
    """Seconds to wait for them (0: answer at once)."""
    until: Literal["all", "any"] = "all"
    """Answer once every task has finished (``all``), or once any one has (``any``: how a client collects a
    batch's results as they come); after ``timeout`` either way."""


# -- answers ------------------------------------------------------------------------------------------------


class _Answer(BaseModel):
    # Non-finite floats in traces (a NaN error of a kernel that wrote nothing) travel as "NaN"/"Infinity":
    # the outermost model's setting decides how nested floats are written, so every answer carries it.
    model_config = ConfigDict(use_attribute_docstrings=True, ser_json_inf_nan="strings")


class ErrorInfo(_Answer):
    """An error a person can act on."""

    code: str
    """Stable machine-readable code, e.g. ``unknown_definition``, ``cancelled``, ``tool_unavailable``."""
    message: str
    """What went wrong and what to do about it."""
    details: Any = None
    """Extra structured facts (validation errors, close matches)."""


class ErrorBody(_Answer):
    """Body of every non-2xx HTTP answer."""

    error: ErrorInfo
    """The error."""


class WorkerInfo(_Answer):
    """One worker lane."""

    device: str
    """``cuda:N`` or ``cpu``; a Ray lane's name (``<node>/gpu#N`` or ``<node>/cpu#N``) under ``serve --ray``."""
    node: str | None = None
    """The Ray node (``<ip>/<node id prefix>``) the lane's actor runs on; None for a lane of the server itself."""
    pid: int | None = None
    """Process id of the lane's Ray actor on its node; None for a lane of the server itself."""
    healthy: bool
    """False when the lane could not start its evaluator or its thread died (see ``detail``)."""
    busy: bool
    """Whether it is running a task now."""
    task_id: str | None = None
    """The task it is running; shown only to a request that carries the server's token (a task id lets its
    holder read and cancel the task)."""
    detail: str | None = None
    """Why it is unhealthy."""


class SandboxInfo(_Answer):
    """How this server confines candidate code (:func:`fibserve.sandbox.status`)."""

    mode: Literal["bwrap", "unsafe-none", "unavailable"]
    """``bwrap``; ``unsafe-none`` when started with ``--unsafe-no-sandbox`` (candidates are not isolated);
    ``unavailable`` when bubblewrap is missing or unusable (candidates are refused)."""
    detail: str
    """One sentence: what confines candidates, or what to install."""


class BuildAheadInfo(_Answer):
    """The build-ahead pool: compiles of queued CUDA/C++ candidates, run before a lane takes them."""

    workers: int
    """Builds it runs at the same time (``fibserve serve --build-workers``)."""
    waiting: int
    """Queued tasks whose build has not started."""
    building: int
    """Queued tasks being built now."""
    built: int
    """Queued tasks whose build is done (a lane takes these first)."""


class HealthAnswer(_Answer):
    """Answer of ``GET /health``."""

    status: Literal["ok", "degraded"]
    """``ok`` when every lane is healthy and candidates can be run confined or by explicit opt-out."""
    workers: list[WorkerInfo]
    """One entry per lane."""
    queue_size: int
    """Pending tasks."""
    running: int
    """Tasks running now."""
    version: str
    """fibserve version."""
    tolerances_locked: bool = False
    """Whether this server refuses ``atol``/``rtol`` in requests (``fibserve serve --locked-tolerances``); the
    tolerances it uses are in every trace's ``correctness.extra`` and in each answer's ``config``."""
    tools: dict[str, str | None] = Field(default_factory=dict)
    """Server-side tool executables (``compute-sanitizer``, ``ncu``, ``nvcc``) or null when absent."""
    sandbox: SandboxInfo | None = None
    """How candidates are confined here (``mode`` ``unsafe-none``: not at all)."""
    build_ahead: BuildAheadInfo | None = None
    """The build-ahead pool; None when it is off (``--build-workers 0``, or lanes on a Ray cluster)."""


class DefinitionSummary(_Answer):
    """One entry of ``GET /definitions``."""

    name: str
    """Definition name."""
    op_type: str
    """Operator family (gemm, mha, ...)."""
    description: str | None = None
    """What it computes."""


class SubmitAnswer(_Answer):
    """Answer of ``POST /evaluate``, ``/sanitize`` and ``/profile`` (HTTP 202)."""

    task_id: str
    """Poll ``GET /tasks/{task_id}`` for the result."""
    kind: Literal["evaluate", "sanitize", "profile"]
    """What was queued."""
    status: str
    """``pending`` right after submission."""
    definition: str
    """Definition the solution implements."""
    normalized_solution_name: str
    """The solution name the traces carry (see ``normalize_solution_name``)."""
    workload_uuids: list[str]
    """The workloads the task covers, in run order."""


class BatchSubmitAnswer(_Answer):
    """Answer of ``POST /evaluate/batch`` (HTTP 202): one evaluation task per candidate, in the order given."""

    definition: str
    """Definition every candidate implements."""
    workload_uuids: list[str]
    """The workloads each task covers, in run order."""
    task_ids: list[str]
    """One task id per candidate; collect the answers with ``POST /tasks/batch`` (``until: any`` returns each
    as it finishes) or ``GET /tasks/{task_id}``."""
    normalized_solution_names: list[str]
    """The solution name each candidate's traces carry (see ``normalize_solution_name``)."""


class TaskAnswer(_Answer):
    """Answer of ``GET /tasks/{id}`` (and an element of ``POST /tasks/batch``).

    ``status`` is ``failed`` only for a task-level failure (infrastructure, tool missing, timeout of the whole
    task, cancel); a candidate that is wrong or crashes still makes a ``completed`` task whose traces say so.
    """

    task_id: str
    """The task's id."""
    kind: str
    """``evaluate``, ``sanitize`` or ``profile``."""
    status: Literal["pending", "running", "completed", "failed"]
    """``completed`` and ``failed`` are final."""
    definition: str
    """Definition name."""
    solution: str
    """Normalized solution name."""
    device: str | None = None
    """Lane that ran it."""
    attempts: int = 0
    """How many times a lane started it (more than one when a server restart interrupted it)."""
    created_at: float
    """When the server accepted it (Unix seconds)."""
    started_at: float | None = None
    """When its last attempt started (Unix seconds)."""
    finished_at: float | None = None
    """When it finished (Unix seconds)."""
    traces: list[Trace] | None = None
    """One trace per workload (evaluate)."""
    analysis: AnalysisOutcome | None = None
    """Static analysis of the candidate (policy, compile log, PTX/SASS families, resources), or why there is
    none (``{"error": ...}``)."""
    executed: bool | None = None
    """Whether the candidate ran (False for CUDA without a GPU: static pipeline only)."""
    config: EvalConfig | None = None
    """Evaluation settings used (tolerances, timing counts, and the layer that set each in ``origin``)."""
    build: BuildSummary | None = None
    """Build summary: status, arch, cached, timings (ms), log (trimmed)."""
    device_info: DeviceInfo | None = None
    """Device name, driver, and clocks/power/temperature at the start and end of the evaluation."""
    sandbox: str | None = None
    """``bwrap`` when the candidate ran inside bubblewrap, ``unsafe-none`` under ``--unsafe-no-sandbox``."""
    limits_hit: dict[str, str] | None = None
    """Workload uuid -> the resource limit the candidate ran into (``limit exceeded: memory (...)``)."""
    workload_errors: dict[str, str] | None = None
    """Workload uuid -> task-level error that kept it from being evaluated."""
    timings_s: dict[str, float] | None = None
    """Wall seconds per phase of the evaluation."""
    sanitizer: list[SanitizerRun] | None = None
    """compute-sanitizer runs (sanitize)."""
    profile: list[ProfileRun] | None = None
    """Nsight Compute runs (profile)."""
    logs: str | None = None
    """Notes and log text for people."""
    error: ErrorInfo | None = None
    """Why the task failed at the task level."""


__all__ = [
    "MAX_BATCH",
    "BatchRequest",
    "BatchSubmitAnswer",
    "BuildAheadInfo",
    "CompileRequest",
    "DefinitionSummary",
    "ErrorBody",
    "ErrorInfo",
    "EvaluateBatchRequest",
    "EvaluateRequest",
    "HealthAnswer",
    "NcuSummary",
    "ProfileRequest",
    "ProfileRun",
    "SanitizeRequest",
    "SanitizerFinding",
    "SanitizerRun",
    "SanitizerTool",
    "SourceLocation",
    "SubmitAnswer",
    "TaskAnswer",
    "WorkerInfo",
    "normalize_solution_name",
]
