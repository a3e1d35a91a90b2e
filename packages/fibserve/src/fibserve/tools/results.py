"""What one tool run over a candidate reports: a compute-sanitizer run (:class:`SanitizerRun`) and an Nsight
Compute run (:class:`ProfileRun`). The tools write them (:mod:`fibserve.tools.sanitizer`,
:mod:`fibserve.tools.ncu`) and the HTTP API answers them inside a task's answer
(:class:`fibserve.serve.models.TaskAnswer`), so they live here, beside the tools, below the server.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SanitizerTool = Literal["memcheck", "racecheck", "initcheck", "synccheck"]
"""compute-sanitizer tools a client may choose (``--tool``)."""


class _ToolResult(BaseModel):
    # the same settings as the HTTP answers that carry these (fibserve.serve.models._Answer)
    model_config = ConfigDict(use_attribute_docstrings=True, ser_json_inf_nan="strings")


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
