"""Nsight Compute (ncu) over a candidate: one warm-up and one measured call, the measured one in an NVTX range.

``ncu --clock-control none`` leaves the GPU clocks as they are (the same regime as the bench's timing), and
``--nvtx --nvtx-include fibserve_measured/`` limits profiling to kernels launched inside the runner's NVTX
push/pop range around the measured call, so Triton's JIT warm-up and torch's own kernels (input generation)
are not profiled. Section, metric and set names come from the client but were validated against a safe
pattern (:mod:`fibserve.api`), and the ncu executable is the server's own.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .jobs import CandidateJob, require_tool, run_each
from .jobs import ToolInfrastructureError as ToolInfrastructureError  # re-exported for callers
from .ncu_digest import (
    DIGEST_FLAGS,
    DIGEST_METRICS,
    after_the_profiled_process,
    csv_rows,
    executed_opcodes,
    summary,
)
from .process import ToolRun, clip, runner_argv
from .results import NcuSummary, ProfileRun
from .runner import DEFAULT_NVTX_RANGE, RESULT_PREFIX

# "  kernel_name(args) (128, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0". The name ends at a non-space
# and the progress line's count is one digit before " pass": with `.*?\s+` and `.*\d+` each start position
# rescanned the rest of a line, and a 120 KB line the candidate printed held the trusted process 20 to 38 s.
_KERNEL_HEADER = re.compile(
    r"^\s{0,4}(\S(?:.*?\S)?)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Context \d+, Stream \d+"
)
_PROFILING = re.compile(r'^==PROF== Profiling "(.+?)"')
_NOISE = (
    re.compile(r"^==PROF== (Connected to|Disconnected from) process"),
    re.compile(r"^==PROF== Profiling \".*\d pass"),
    re.compile(r"^" + re.escape(RESULT_PREFIX)),
)


class ProfilerUnavailable(RuntimeError):
    """ncu cannot run here (not installed, or the lane has no GPU)."""


def ncu_argv(
    executable: Path,
    request_path: Path,
    *,
    ncu_set: str | None,
    sections: list[str],
    metrics: list[str],
    page: str,
    nvtx_range: str = DEFAULT_NVTX_RANGE,
    digest: bool = False,
) -> list[str]:
    """The ncu command for one profile of the candidate runner (``digest``: raw CSV with the digest metrics)."""
    argv = [
        str(executable),
        "--clock-control", "none",
        "--nvtx",
        "--nvtx-include", f"{nvtx_range}/",
        "--target-processes", "all",
        *(DIGEST_FLAGS if digest else ("--page", page)),
    ]  # fmt: skip
    if ncu_set:
        argv += ["--set", ncu_set]
    for section in sections:
        argv += ["--section", section]
    metrics = [*metrics, *DIGEST_METRICS] if digest else metrics
    if metrics:
        argv += ["--metrics", ",".join(metrics)]
    return [*argv, *runner_argv(request_path)]


def kernel_names(text: str) -> list[str]:
    """Profiled kernel names in order, from the report's headers or CSV rows; when ncu did not finish (no
    ``Disconnected`` line), from its progress lines.

    Only the report after ncu's last ``==PROF== Disconnected from process`` line counts: the candidate's own
    output comes before it, and a header it printed named a kernel when ncu had profiled none.
    """
    lines = text.splitlines()
    report = after_the_profiled_process(lines)
    names = [m.group(1) for line in report or [] if (m := _KERNEL_HEADER.match(line))]
    if not names:
        names = [row.get("Kernel Name", "") for row in csv_rows(text)]
    if not names and report is None:
        names = [m.group(1) for line in lines if (m := _PROFILING.match(line))]
    return names


def clean_report(text: str) -> str:
    """ncu's output without connection/progress lines and the runner's summary line."""
    return clip(
        "\n".join(line for line in text.splitlines() if not any(p.match(line) for p in _NOISE)).strip()
    )


def run_profile(
    job: CandidateJob,
    *,
    tool_path: Path | None,
    ncu_set: str | None,
    sections: list[str],
    metrics: list[str],
    page: str,
    digest: bool = False,
) -> list[ProfileRun]:
    """Profile the candidate of ``job`` on each workload with ncu on ``job.device``.

    Args:
        job: the candidate, its workloads, the lane's device, the time limit of one run (seconds), the
            scratch directory (deleted afterwards), and the process/stop callbacks.
        tool_path: the server's ncu (None when absent).
        ncu_set, sections, metrics, page: ncu's ``--set``, ``--section``, ``--metrics`` and ``--page``.
        digest: also read executed instructions per opcode and a summary (:mod:`fibserve.tools.ncu_digest`).

    Raises:
        ProfilerUnavailable: no ncu here, or ``job.device`` is not a GPU.
        ToolInfrastructureError: the candidate could not be prepared for reasons that are not its own.
    """
    executable = require_tool(
        tool_path,
        job.device,
        ProfilerUnavailable,
        name="ncu",
        title="ncu (Nsight Compute)",
        install="Nsight Compute",
        endpoint="/profile",
    )
    return profile_candidate(
        job,
        executable=executable,
        ncu_set=ncu_set,
        sections=sections,
        metrics=metrics,
        page=page,
        digest=digest,
    )


def profile_candidate(
    job: CandidateJob,
    *,
    executable: Path,
    ncu_set: str | None,
    sections: list[str],
    metrics: list[str],
    page: str,
    digest: bool = False,
) -> list[ProfileRun]:
    """The runs of :func:`run_profile` after its availability checks (``executable`` given).

    Raises:
        ToolInfrastructureError: the candidate could not be prepared for reasons that are not its own.
    """

    def not_built(workload: Any, _variant: str, log: str) -> ProfileRun:
        return ProfileRun(
            workload=workload.uuid, ok=False, exit_code=None, note="the candidate did not build", report=log
        )

    def finished(workload: Any, _variant: str, result: ToolRun) -> ProfileRun:
        names = kernel_names(result.output)
        note = None
        if result.timed_out:
            note = f"ncu was killed after {job.timeout_s:g} s"
        elif result.runner is not None and not result.runner.get("ok"):
            note = f"the candidate failed: {result.runner.get('error')}"
        elif result.exit_code != 0:
            note = f"ncu exited with status {result.exit_code}"
        elif not names:
            note = f"no kernel was launched inside the NVTX range {DEFAULT_NVTX_RANGE!r}"
        rows = csv_rows(result.output) if digest and note is None else []
        digested = summary(rows)
        return ProfileRun(
            workload=workload.uuid,
            ok=note is None,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            note=note,
            kernels=names,
            report=clean_report(result.output),
            executed_opcodes=executed_opcodes(rows) if digest and note is None else None,
            summary=NcuSummary.model_validate(digested) if digested else None,
        )

    return run_each(
        job,
        variants=["profile"],
        calls=2,
        nvtx_range=DEFAULT_NVTX_RANGE,
        argv=lambda _variant, request_path: ncu_argv(
            executable,
            request_path,
            ncu_set=ncu_set,
            sections=sections,
            metrics=metrics,
            page=page,
            digest=digest,
        ),
        not_built=not_built,
        finished=finished,
    )
