"""The run loop shared by compute-sanitizer and ncu: one candidate, one tool process per (workload, variant).

:mod:`fibserve.tools.sanitizer` and :mod:`fibserve.tools.ncu` differ only in the tool's command line and in
how a finished process becomes a result; everything else lives here once: the checks that the tool can run
at all, building the candidate (:func:`fibserve.tools.process.prepare_candidate`), a runner request per run,
the tool process (:func:`fibserve.tools.process.run_tool`), the stop check between runs, and removing the
task's scratch directory afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .process import ToolRun, clip, load_paths, prepare_candidate, run_tool, runner_device, write_request
from .runner import runner_request

R = TypeVar("R")


class ToolInfrastructureError(RuntimeError):
    """The service could not prepare the run (e.g. the build toolchain failed); not the candidate's fault."""


@dataclass(frozen=True)
class CandidateJob:
    """One candidate to run a tool over, and where and how long to run it."""

    solution: Any
    """The :class:`fibserve.trace.Solution` under test."""
    definition: Any
    """Its :class:`fibserve.trace.Definition`."""
    workloads: list[Any]
    """The workloads to run it on (one tool process each, per variant)."""
    catalog: Any
    """Anything with ``roots`` (trace-set roots for safetensors inputs), e.g. :class:`fibserve.datasets.catalog.Catalog`."""
    device: str
    """The lane's device, ``cuda:N`` or ``cpu``."""
    timeout_s: float
    """Limit of one build and of one tool process (seconds)."""
    scratch: Path
    """A fresh directory for this task; deleted afterwards."""
    on_process: Callable[[subprocess.Popen[Any]], None] | None = None
    """Called with each started process (so a cancel can kill its group)."""
    check: Callable[[], None] | None = None
    """Called before each run; raises to stop early."""


def require_tool(
    tool_path: Path | None,
    device: str,
    unavailable: type[RuntimeError],
    *,
    name: str,
    title: str,
    install: str,
    endpoint: str,
) -> Path:
    """``tool_path`` when the tool can run on ``device``.

    Args:
        name: the executable's name (``ncu``).
        title: how the tool is named in the messages (``ncu (Nsight Compute)``).
        install: what to install for it (``Nsight Compute``).
        endpoint: the server route that runs it (``/profile``).

    Raises:
        unavailable: when ``tool_path`` is None (what to install), else when ``device`` is not a CUDA device
            (where to send the request instead).
    """
    if tool_path is None:
        raise unavailable(
            f"{title} not available on this server: install {install} ({name} on PATH or in "
            "/usr/local/cuda/bin) and restart fibserve serve"
        )
    if not device.startswith("cuda"):
        raise unavailable(
            f"{name} needs a CUDA GPU, but this server's lane runs on {device}; send {endpoint} to a server "
            "with a GPU"
        )
    return tool_path


def run_each(
    job: CandidateJob,
    *,
    variants: Sequence[str],
    calls: int,
    argv: Callable[[str, Path], list[str]],
    not_built: Callable[[Any, str, str], R],
    finished: Callable[[Any, str, ToolRun], R],
    nvtx_range: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> list[R]:
    """Build the candidate once, then run the tool for each workload and each of ``variants``, in that order.

    Args:
        variants: names of the runs per workload (a sanitizer tool each; one name for ncu); each run's
            request file is ``{variant}-{workload uuid}.json`` in ``job.scratch``.
        calls: how many times the runner calls the candidate per run.
        argv: ``(variant, request path) -> the tool's command``.
        not_built: ``(workload, variant, the build log cut to size) -> result`` when the candidate did not build.
        finished: ``(workload, variant, tool run) -> result`` for each tool process.
        nvtx_range: the NVTX range the runner puts around its last call (None: no range).
        extra_env: added to the tool process's environment.

    Returns:
        One result per (workload, variant), workload-major.

    Raises:
        ToolInfrastructureError: the candidate could not be prepared for reasons that are not its own.
    """
    job.scratch.mkdir(parents=True, exist_ok=True)
    try:
        prepared = prepare_candidate(job.definition, job.solution, device=job.device, timeout_s=job.timeout_s)
        if prepared.infrastructure_error:
            raise ToolInfrastructureError(prepared.infrastructure_error)
        results: list[R] = []
        for workload in job.workloads:
            for variant in variants:
                if job.check is not None:
                    job.check()
                if prepared.load is None:
                    results.append(not_built(workload, variant, clip(prepared.not_built or "")))
                    continue
                request = runner_request(
                    job.definition,
                    workload,
                    prepared.load,
                    device=runner_device(job.device),
                    calls=calls,
                    roots=job.catalog.roots,
                    nvtx_range=nvtx_range,
                )
                path = write_request(job.scratch, f"{variant}-{workload.uuid}", request)
                run = run_tool(
                    argv(variant, path),
                    readable=[path, *load_paths(prepared.load), *job.catalog.roots],
                    device=job.device,
                    timeout_s=job.timeout_s,
                    on_process=job.on_process,
                    extra_env=extra_env,
                )
                results.append(finished(workload, variant, run))
        if prepared.build is not None:
            prepared.build.release()
        return results
    finally:
        shutil.rmtree(job.scratch, ignore_errors=True)
