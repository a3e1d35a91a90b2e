"""compute-sanitizer over a candidate: memcheck (default), racecheck, initcheck, synccheck.

Each (tool, workload) is one ``compute-sanitizer`` process running :mod:`fibserve.tools.runner` once. The
verdict is the tool's: ``--error-exitcode 86`` makes any finding exit 86, so a run is clean exactly when the
process exits 0; nothing is decided by searching the text. The printed report is kept with noise removed
(banner, the runner's summary line) and cut to a bounded size. CUDA candidates are built with ``-lineinfo``
(the build's fixed flags), so memcheck reports name the source line of a bad access.

API errors are not reported (``--report-api-errors no``): torch and Triton probe the driver with calls that
fail by design, and counting those would fail every candidate; a candidate whose own API call fails still
fails its run (the runner raises or the tool's kernel checks catch the consequence).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .jobs import CandidateJob, require_tool, run_each
from .jobs import ToolInfrastructureError as ToolInfrastructureError  # re-exported for callers
from .process import ToolRun, clip, runner_argv
from .results import SanitizerFinding, SanitizerRun, SourceLocation
from .runner import RESULT_PREFIX

ERROR_EXIT_CODE = 86
"""Exit status compute-sanitizer is told to use when it found errors (``--error-exitcode``)."""

PRINT_LIMIT = 50
"""Most errors printed per run (``--print-limit``); the summary still counts all of them."""

SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
"""Every torch tensor gets its own ``cudaMalloc``: memcheck checks accesses against allocations, and inside
the caching allocator's large segments a write past the end of a small tensor would look legal."""

_SUMMARY = re.compile(r"ERROR SUMMARY:\s+(\d{1,12})\s+error")  # bounded: int() refuses over 4,300 digits
_LINE = re.compile(r"^=========(?: (.*))?$")
# "at vector_add(float *, long)+0x1b0 in /tmp/build/kernel.cu:10" (a race: "... access at ... in f.cu:15"). The
# function holds no "at ": with `.+?` each "at " of a line the candidate printed scanned the rest of it (a 120 KB
# line of "at at at ..." held the trusted process 27 s).
_AT = re.compile(
    r"\bat (?:(?P<function>(?:(?!\bat )[^\n])+?)\+0x[0-9a-fA-F]+ )?in (?P<file>\S+?):(?P<line>\d{1,9})\b"
)
_THREAD = re.compile(r"by thread \((?P<t>[\d, ]+)\) in block \((?P<b>[\d, ]+)\)")
_NOT_FINDINGS = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "RACECHECK SUMMARY",
    "LEAK SUMMARY",
    "Target application",
)
MAX_FINDINGS = 10
"""Most distinct findings kept per run (the output keeps the rest)."""
_NOISE = (
    re.compile(r"^=+ COMPUTE-SANITIZER\s*$"),
    re.compile(r"^" + re.escape(RESULT_PREFIX)),
)


class SanitizerUnavailable(RuntimeError):
    """compute-sanitizer cannot run here (not installed, or the lane has no GPU)."""


def sanitizer_argv(executable: Path, tool: str, request_path: Path) -> list[str]:
    """The compute-sanitizer command for one run of the candidate runner."""
    return [
        str(executable),
        "--tool", tool,
        "--error-exitcode", str(ERROR_EXIT_CODE),
        "--print-limit", str(PRINT_LIMIT),
        "--report-api-errors", "no",
        "--show-backtrace", "device",
        "--target-processes", "all",
        *runner_argv(request_path),
    ]  # fmt: skip


def clean_output(text: str) -> str:
    """The tool's report without its banner and the runner's summary line, blank runs collapsed."""
    lines = [line for line in text.splitlines() if not any(p.match(line) for p in _NOISE)]
    out: list[str] = []
    for line in lines:
        if line.strip("= ") == "" and out and out[-1].strip("= ") == "":
            continue
        out.append(line)
    return clip("\n".join(out).strip())


def _reports(text: str) -> list[list[str]]:
    """The tool's lines grouped into reports: a headline (not indented) and its indented detail lines."""
    reports: list[list[str]] = []
    for raw in text.splitlines():
        match = _LINE.match(raw)
        if match is None or not (match.group(1) or "").strip():
            continue
        body = match.group(1)
        if not body.startswith(" "):
            if body.startswith(_NOT_FINDINGS):
                reports.append([])  # ends the report before it; its lines are not a finding
                continue
            reports.append([body.strip()])
        elif reports and reports[-1]:
            reports[-1].append(body.strip())
    return [r for r in reports if r]


def _location(match: re.Match[str], sources: dict[str, str]) -> SourceLocation:
    """A location, its file mapped to the solution's source of the same name (the build copies them)."""
    printed, line = match.group("file"), int(match.group("line"))
    name = next((path for path in sources if printed == path or printed.endswith("/" + path)), None)
    text = None
    if name is not None:
        lines = sources[name].splitlines()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else None
    function = match.group("function")
    return SourceLocation(
        file=name or printed, line=line, function=function.strip() if function else None, source=text
    )


def findings(text: str, sources: dict[str, str]) -> list[SanitizerFinding]:
    """The distinct errors in a compute-sanitizer report, with the source lines they name.

    Args:
        text: the tool's output (``=========``-prefixed lines; other lines are ignored).
        sources: the solution's sources, path -> content, to quote the named lines from.

    Reports with the same headline and places (one per failing thread, up to ``--print-limit``) become one
    finding with a count; at most :data:`MAX_FINDINGS` are kept, in the tool's order.
    """
    found: dict[tuple[str, tuple[tuple[str, int], ...]], SanitizerFinding] = {}
    for report in _reports(text):
        headline, details = report[0], report[1:]
        places = [_location(m, sources) for line in report for m in _AT.finditer(line)]
        key = (headline.split(" at ")[0], tuple((p.file, p.line) for p in places))
        if key in found:
            found[key].count += 1
            continue
        if len(found) >= MAX_FINDINGS:
            continue
        thread = next((m.group(0) for line in details if (m := _THREAD.search(line))), None)
        extra = [
            line for line in details
            if not _AT.search(line) and not _THREAD.search(line) and not line.startswith(("Host Frame", "Device Frame", "Saved host"))
        ]  # fmt: skip
        found[key] = SanitizerFinding(
            message=key[0], locations=places, thread=thread.removeprefix("by ") if thread else None,
            details=extra[:4],
        )  # fmt: skip
    return list(found.values())


def error_count(text: str) -> int | None:
    """Errors counted in the last ``ERROR SUMMARY`` line, or None when there is none."""
    found = _SUMMARY.findall(text)
    return int(found[-1]) if found else None


def verdict(exit_code: int | None, timed_out: bool) -> str:
    """``clean``, ``errors``, ``timeout`` or ``crashed`` from the tool's exit status."""
    if timed_out:
        return "timeout"
    if exit_code == 0:
        return "clean"
    if exit_code == ERROR_EXIT_CODE:
        return "errors"
    return "crashed"


def run_sanitizer(job: CandidateJob, *, tool_path: Path | None, tools: list[str]) -> list[SanitizerRun]:
    """Run each of ``tools`` over the candidate of ``job`` on each workload, on ``job.device``.

    Args:
        job: the candidate, its workloads, the lane's device, the time limit of one run (seconds), the
            scratch directory (deleted afterwards), and the process/stop callbacks.
        tool_path: the server's compute-sanitizer (None when absent).
        tools: sanitizer tools (``memcheck``, ``racecheck``, ``initcheck``, ``synccheck``).

    Raises:
        SanitizerUnavailable: no compute-sanitizer here, or ``job.device`` is not a GPU.
        ToolInfrastructureError: the candidate could not be prepared for reasons that are not its own.
    """
    executable = require_tool(
        tool_path,
        job.device,
        SanitizerUnavailable,
        name="compute-sanitizer",
        title="compute-sanitizer",
        install="the CUDA toolkit",
        endpoint="/sanitize",
    )
    return sanitize_candidate(job, executable=executable, tools=tools)


def sanitize_candidate(job: CandidateJob, *, executable: Path, tools: list[str]) -> list[SanitizerRun]:
    """The runs of :func:`run_sanitizer` after its availability checks (``executable`` given).

    Raises:
        ToolInfrastructureError: the candidate could not be prepared for reasons that are not its own.
    """

    def not_built(workload: Any, tool: str, log: str) -> SanitizerRun:
        return SanitizerRun(
            tool=tool, workload=workload.uuid, passed=False, verdict="not_built", exit_code=None, output=log
        )

    sources = {source.path: source.content for source in job.solution.sources}

    def finished(workload: Any, tool: str, result: ToolRun) -> SanitizerRun:
        return SanitizerRun(
            tool=tool,
            workload=workload.uuid,
            passed=result.exit_code == 0 and not result.timed_out,
            verdict=verdict(result.exit_code, result.timed_out),
            exit_code=result.exit_code,
            error_count=error_count(result.output),
            timed_out=result.timed_out,
            output=clean_output(result.output),
            findings=findings(result.output, sources),
        )

    return run_each(
        job,
        variants=tools,
        calls=1,
        argv=lambda tool, request_path: sanitizer_argv(executable, tool, request_path),
        not_built=not_built,
        finished=finished,
        extra_env=SANITIZER_ENV,
    )
