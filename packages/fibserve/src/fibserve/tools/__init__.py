"""Debugging and profiling tools over a candidate: compute-sanitizer and Nsight Compute (ncu).

Both run :mod:`fibserve.tools.runner` (which loads the built candidate like the bench's sandbox worker and
calls it) under the tool, in its own process group with a time limit; the executables are found once at
server start (:mod:`fibserve.tools.executables`), never named by a client. The run loop both share is
:mod:`fibserve.tools.jobs`.

Public API::

    CandidateJob(solution=..., definition=..., workloads=..., catalog=..., device=..., timeout_s=..., scratch=...)
    run_sanitizer(job, tool_path=..., tools=["memcheck"]) -> list[SanitizerRun]
    run_profile(job, tool_path=..., ncu_set=..., sections=..., metrics=..., page=...) -> list[ProfileRun]
    ToolPaths.discover() -> ToolPaths
"""

from .executables import ToolPaths, find_tool

__all__ = ["ToolPaths", "find_tool"]
