"""Running a profiling/debugging tool over the candidate runner: build, sandbox, time limit.

Shared by :mod:`fibserve.tools.sanitizer` and :mod:`fibserve.tools.ncu`. The candidate is built on the
trusted side (:func:`fibserve.bench.candidate.prepare`: policy, nvcc, build cache), then the tool runs
``python -m fibserve.tools.runner`` in a :func:`fibserve.sandbox.run` sandbox like the evaluation workers'
(own namespaces, allowlisted mounts, the GPU's device nodes, limits, an environment from an allowlist) that
also sees, read-only, the tool's install directory, the run's request file, the candidate's build products
and the trace-set roots (safetensors inputs), with only the lane's GPU visible. A run past its time limit is
killed with everything it started.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fibserve.sandbox import WORKER_LIMITS, Mounts
from fibserve.sandbox import run as run_sandboxed

from .runner import RESULT_PREFIX

MAX_OUTPUT_CHARS = 40_000
"""Longest tool output kept (head and tail are kept, the middle is cut)."""


@dataclass
class ToolRun:
    """Outcome of one tool process."""

    exit_code: int | None
    """Exit status; None when it was killed on timeout."""
    output: str
    """Everything it printed (stdout and stderr interleaved), cut to ``MAX_OUTPUT_CHARS``."""
    timed_out: bool
    seconds: float
    sandbox: str
    """``bwrap``, or ``unsafe-none`` under ``--unsafe-no-sandbox``."""
    runner: dict[str, Any] | None
    """The runner's final ``FIBSERVE_RUNNER`` summary, when it printed one."""


def clip(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text`` cut to about ``limit`` characters, keeping the first and last parts."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"


def cuda_index(device: str) -> str | None:
    """``"3"`` for ``cuda:3``; None for ``cpu``."""
    return device.split(":", 1)[1] if device.startswith("cuda:") else None


def runner_device(device: str) -> str:
    """The device as the runner sees it: ``cuda:0`` for any GPU (only the lane's GPU is visible), else ``cpu``."""
    return "cuda:0" if device.startswith("cuda") else "cpu"


def runner_env(device: str) -> dict[str, str]:
    """What a tool run adds to the sandbox's environment: only the lane's GPU visible (or the Triton
    interpreter on CPU)."""
    index = cuda_index(device)
    return {"CUDA_VISIBLE_DEVICES": index} if index is not None else {"TRITON_INTERPRET": "1"}


def load_paths(load: dict[str, Any]) -> list[Path]:
    """The build products a runner ``load`` request names (the library, or the Python package)."""
    if load.get("library"):
        return [Path(load["library"])]
    if load.get("package_root") and load.get("package"):
        return [Path(load["package_root"]) / load["package"]]
    return []


NSIGHT_INSTALL_ROOTS = (Path("/opt/nvidia"),)
"""Where Nsight Compute installs outside the CUDA toolkit; its ``ncu`` launcher looks there (seen on the H200:
``/usr/local/cuda/bin/ncu`` is a script that searches ``<toolkit>/nsight-compute*`` and ``/opt/nvidia``)."""


def tool_install_dirs(tool: Path) -> list[Path]:
    """What a sandboxed tool must see besides itself: its directory (as named and resolved), the toolkit's
    ``nsight-compute*`` and ``compute-sanitizer`` folders beside that ``bin/``, and :data:`NSIGHT_INSTALL_ROOTS`.
    Without them the ``ncu`` launcher exits 1 with "nsight-compute directory is not found"."""
    dirs = [tool.parent, tool.resolve().parent]
    for bin_dir in dict.fromkeys(dirs):
        toolkit = bin_dir.parent
        dirs += sorted(toolkit.glob("nsight-compute*")) + sorted(toolkit.glob("compute-sanitizer"))
    dirs += [root for root in NSIGHT_INSTALL_ROOTS if root.is_dir()]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def run_tool(
    argv: list[str],
    *,
    device: str,
    timeout_s: float,
    readable: Sequence[Path] = (),
    on_process: Callable[[Any], None] | None = None,
    extra_env: dict[str, str] | None = None,
) -> ToolRun:
    """Run ``argv`` (a tool command ending in the runner) in a sandbox that also sees ``readable`` and the
    tool's own install directory, killed whole after ``timeout_s`` seconds.

    Raises:
        fibserve.sandbox.SandboxUnavailable: tools cannot be confined here.
    """
    tool = Path(argv[0])
    mounts = Mounts(
        python=True,
        gpu=device.startswith("cuda"),
        readable=(*readable, *tool_install_dirs(tool)),
    )
    result = run_sandboxed(
        argv,
        mounts=mounts,
        limits=WORKER_LIMITS,
        timeout_s=timeout_s,
        env={**runner_env(device), **(extra_env or {})},
        on_start=on_process,
    )
    output = result.output if result.limit is None else f"{result.limit.sentence()}\n{result.output}"
    runner = None
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                runner = json.loads(line[len(RESULT_PREFIX) :])
            except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
                runner = None
            if not isinstance(runner, dict):  # the candidate printed this line as much as the runner did
                runner = None
            break
    seconds = result.wall_ms / 1000.0
    return ToolRun(result.returncode, output, result.timed_out, seconds, result.sandbox, runner)


@dataclass
class PreparedCandidate:
    """A built candidate ready for the runner, or the reason it is not."""

    load: dict[str, Any] | None
    """The worker ``load`` request."""
    not_built: str | None
    """Candidate-side failure (COMPILE_ERROR / TIMEOUT with its log) when it did not build."""
    infrastructure_error: str | None
    """Service-side failure (toolchain missing, builder crashed)."""
    build: Any = None
    """The ``BuildResult``, whose lease keeps the build in the cache while the tool runs read it."""


def prepare_candidate(definition: Any, solution: Any, *, device: str, timeout_s: float) -> PreparedCandidate:
    """Build ``solution`` for the lane's GPU architecture with the bench's own preparation step."""
    from fibserve.bench.candidate import cuda_arch, prepare

    capability = None
    if device.startswith("cuda"):
        import torch

        capability = torch.cuda.get_device_capability(torch.device(device))
    prepared = prepare(definition, solution, arch=cuda_arch(capability), timeout=timeout_s)
    if prepared.task_error:
        return PreparedCandidate(None, None, prepared.task_error)
    if prepared.load is None:
        status = prepared.status.value if prepared.status is not None else "COMPILE_ERROR"
        return PreparedCandidate(None, f"the candidate did not build ({status}):\n{prepared.log}", None)
    return PreparedCandidate(prepared.load, None, None, prepared.result)


def write_request(workdir: Path, name: str, request: dict[str, Any]) -> Path:
    """Write a runner request JSON into ``workdir`` and return its path."""
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    return path


def runner_argv(request_path: Path) -> list[str]:
    """The command that runs the candidate runner on ``request_path``."""
    return [sys.executable, "-m", "fibserve.tools.runner", str(request_path)]
