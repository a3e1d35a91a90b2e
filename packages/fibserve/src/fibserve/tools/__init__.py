"""Debugging and profiling tools over a candidate: compute-sanitizer and Nsight Compute (ncu).

Both run :mod:`fibserve.tools.runner` (which loads the built candidate like the bench's sandbox worker and
calls it) under the tool, in its own process group with a time limit; the executables are found once at
server start (:mod:`fibserve.tools.executables`), never named by a client.

Public API::

    run_sanitizer(tool_path=..., solution=..., definition=..., workloads=..., tools=["memcheck"], ...) -> list[SanitizerRun]
    run_profile(tool_path=..., solution=..., definition=..., workloads=..., ncu_set=..., sections=..., ...) -> list[ProfileRun]
    ToolPaths.discover() -> ToolPaths
"""

from .executables import ToolPaths, find_tool

__all__ = ["ToolPaths", "find_tool"]
