"""What one tool run over a candidate reports: a compute-sanitizer run (:class:`SanitizerRun`) and an Nsight
Compute run (:class:`ProfileRun`). The tools write them (:mod:`fibserve.tools.sanitizer`,
:mod:`fibserve.tools.ncu`) and the HTTP API answers them inside a task's answer
(:class:`fibserve.api.TaskAnswer`), so they live here, beside the tools, below the server.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SanitizerTool = Literal["memcheck", "racecheck", "initcheck", "synccheck"]
"""compute-sanitizer tools a client may choose (``--tool``)."""


class _ToolResult(BaseModel):
    # the same settings as the HTTP answers that carry these (fibserve.api._Answer)
    model_config = ConfigDict(use_attribute_docstrings=True, ser_json_inf_nan="strings")


class SourceLocation(_ToolResult):
    """A place in the candidate's source that a compute-sanitizer finding names (builds carry ``-lineinfo``)."""

    file: str
    """The source file as the solution names it (``kernel.cu``), or as the tool printed it when it is none."""
    line: int
    """1-based line number."""
    function: str | None = None
    """The kernel or device function, as the tool printed it."""
    source: str | None = None
    """That line of the solution's source, stripped; None when the file is not one of the solution's."""


class SanitizerFinding(_ToolResult):
    """One kind of error a compute-sanitizer run reported: identical reports (same message and places, other
    threads) are counted once."""

    message: str
    """The tool's headline, e.g. ``Invalid __global__ write of size 4 bytes``."""
    count: int = 1
    """How many reports of the printed ones (``--print-limit``) had this message and these places."""
    locations: list[SourceLocation] = Field(default_factory=list)
    """Where (a race names both accesses), in the tool's order."""
    thread: str | None = None
    """The first reporting thread, e.g. ``thread (63,0,0) in block (4,0,0)``."""
    details: list[str] = Field(default_factory=list)
    """Further lines of the first report (address, allocation), host backtrace left out."""


class SanitizerRun(_ToolResult):
    """One compute-sanitizer run (one tool on one workload)."""

    tool: SanitizerTool
    """The compute-sanitizer tool."""
    workload: str
    """Workload uuid."""
    passed: bool
    """The tool's verdict: it exited 0 (``--error-exitcode`` makes any finding exit non-zero)."""
    verdict: Literal["clean", "errors", "crashed", "timeout", "not_built"] = "clean"
    """``clean`` (exit 0), ``errors`` (the tool found errors), ``crashed`` (the candidate or runner failed
    without a tool finding), ``timeout`` (killed at the time limit), ``not_built`` (the candidate did not build)."""
    exit_code: int | None
    """Exit status of compute-sanitizer; None when it was killed on timeout."""
    error_count: int | None = None
    """Errors the tool counted (from its ``ERROR SUMMARY``), when it printed one."""
    timed_out: bool = False
    """Whether it was killed at the time limit."""
    output: str = ""
    """The tool's report with driver noise removed, cut to a bounded size."""
    findings: list[SanitizerFinding] = Field(default_factory=list)
    """The errors of ``output``, parsed, with the source lines they name (:func:`fibserve.tools.sanitizer.findings`)."""


class NcuSummary(_ToolResult):
    """A short Nsight Compute summary of the longest kernel of the measured call (``digest``)."""

    kernel: str
    """Its name as ncu prints it."""
    kernels_profiled: int
    """Kernels launched inside the measured call."""
    duration_ms: float | None = None
    """``gpu__time_duration.sum`` (ms; under ncu, so not a timing to compare)."""
    sol_compute_pct: float | None = None
    """Compute (SM) throughput, % of peak (``sm__throughput.avg.pct_of_peak_sustained_elapsed``)."""
    sol_memory_pct: float | None = None
    """Memory throughput, % of peak (``gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed``)."""
    achieved_occupancy_pct: float | None = None
    """Achieved occupancy, % of the maximum warps (``sm__warps_active.avg.pct_of_peak_sustained_active``)."""
    theoretical_occupancy_pct: float | None = None
    """Theoretical occupancy, % (``sm__maximum_warps_per_active_cycle_pct``)."""
    top_stalls: list[tuple[str, float]] = Field(default_factory=list)
    """Largest warp stall reasons, ``(reason, warps stalled per issued instruction)``, largest first."""


class ProfileRun(_ToolResult):
    """One Nsight Compute run (one workload)."""

    workload: str
    """Workload uuid."""
    ok: bool
    """Whether ncu exited 0 and profiled at least one kernel."""
    exit_code: int | None
    """Exit status of ncu; None when it was killed on timeout."""
    timed_out: bool = False
    """Whether it was killed at the time limit."""
    note: str | None = None
    """Why the run is not ok (no kernel in the NVTX range, candidate failed, not built)."""
    kernels: list[str] = Field(default_factory=list)
    """Names of the profiled kernels, in launch order."""
    report: str = ""
    """ncu's printed report for the measured call, cut to a bounded size."""
    executed_opcodes: dict[str, int] | None = None
    """``digest``: warp-level instructions executed per base SASS opcode (``HGMMA``, ``UTMALDG``...), summed
    over the measured call's kernels (``sass__inst_executed_per_opcode``); None without ``digest``."""
    summary: NcuSummary | None = None
    """``digest``: the short summary of the longest kernel; None without ``digest`` or when nothing was read."""
