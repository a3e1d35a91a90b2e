"""Running a profiling/debugging tool over the candidate runner: build, sandbox, process group, time limit.

Shared by :mod:`fibserve.tools.sanitizer` and :mod:`fibserve.tools.ncu`. The candidate is built on the
trusted side (:func:`fibserve.bench.candidate.prepare`: policy, nvcc, build cache), then the tool runs
``python -m fibserve.tools.runner`` in its own process group with a minimal environment (no secrets), inside
bubblewrap when it is installed (read-only root, ``/dev`` for the GPU, private ``/tmp``, no network, only the
run's directory writable), with only the lane's GPU visible. A run past its time limit is killed with its
whole process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .runner import RESULT_PREFIX

MAX_OUTPUT_CHARS = 40_000
"""Longest tool output kept (head and tail are kept, the middle is cut)."""

_PASS_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")


@dataclass
class ToolRun:
    """Outcome of one tool process."""

    exit_code: int | None
    """Exit status; None when it was killed on timeout."""
    output: str
    """Everything it printed (stdout and stderr interleaved), cut to ``MAX_OUTPUT_CHARS``."""
    timed_out: bool
    seconds: float
    sandboxed: bool
    """Whether it ran inside bubblewrap."""
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


def runner_env(workdir: Path, device: str) -> dict[str, str]:
    """Environment of a tool run: a few system variables, private caches, only the lane's GPU visible."""
    import fibserve

    package_root = str(Path(fibserve.__file__).resolve().parent.parent)
    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir / "tmp"),
        TRITON_CACHE_DIR=str(workdir / "triton"),
        CUDA_CACHE_PATH=str(workdir / "nv"),
        PYTHONPATH=os.pathsep.join([package_root, *[p for p in sys.path if p and p != package_root]]),
        PYTHONDONTWRITEBYTECODE="1",
    )
    index = cuda_index(device)
    if index is not None:
        env["CUDA_VISIBLE_DEVICES"] = index
    else:
        env["TRITON_INTERPRET"] = "1"
    (workdir / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def _bwrap_argv(workdir: Path) -> list[str] | None:
    if os.environ.get("FIBSERVE_TOOLS_SANDBOX", "1") == "0" or shutil.which("bwrap") is None:
        return None
    from fibserve.bench.sandbox import gpu_bwrap_prefix

    return [*gpu_bwrap_prefix(workdir), "--"]


def run_tool(
    argv: list[str],
    *,
    workdir: Path,
    device: str,
    timeout_s: float,
    on_process: Callable[[subprocess.Popen[Any]], None] | None = None,
    extra_env: dict[str, str] | None = None,
) -> ToolRun:
    """Run ``argv`` (a tool command ending in the runner) in its own process group, sandboxed when possible.

    ``extra_env`` is added to the minimal environment. If bubblewrap is installed but cannot start here (no
    user namespaces), the run is repeated without it and the output says so.
    """
    env = {**runner_env(workdir, device), **(extra_env or {})}
    sandbox = _bwrap_argv(workdir)
    result = _run_once((sandbox or []) + argv, workdir, env, timeout_s, on_process)
    result.sandboxed = sandbox is not None
    if (
        sandbox is not None
        and result.exit_code not in (0, None)
        and result.output.lstrip().startswith("bwrap:")
    ):
        note = f"[fibserve] bubblewrap could not start ({result.output.strip()[:200]}); ran without it\n"
        result = _run_once(argv, workdir, env, timeout_s, on_process)
        result.output = note + result.output
        result.sandboxed = False
    return result


def _run_once(
    argv: list[str],
    workdir: Path,
    env: dict[str, str],
    timeout_s: float,
    on_process: Callable[[subprocess.Popen[Any]], None] | None,
) -> ToolRun:
    log_path = workdir / f"tool-{time.monotonic_ns()}.log"
    started = time.monotonic()
    timed_out = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(workdir),
            start_new_session=True,
        )
        if on_process is not None:
            on_process(proc)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = log_path.read_text(encoding="utf-8", errors="replace")
    runner = None
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                runner = json.loads(line[len(RESULT_PREFIX) :])
            except ValueError:
                runner = None
            break
    exit_code = None if timed_out else proc.returncode
    return ToolRun(exit_code, output, timed_out, time.monotonic() - started, False, runner)


@dataclass
class PreparedCandidate:
    """A built candidate ready for the runner, or the reason it is not."""

    load: dict[str, Any] | None
    """The worker ``load`` request."""
    not_built: str | None
    """Candidate-side failure (COMPILE_ERROR / TIMEOUT with its log) when it did not build."""
    infrastructure_error: str | None
    """Service-side failure (toolchain missing, builder crashed)."""


def prepare_candidate(
    definition: Any, solution: Any, *, device: str, timeout_s: float, scratch: Path
) -> PreparedCandidate:
    """Build ``solution`` for the lane's GPU architecture with the bench's own preparation step."""
    from fibserve.bench.candidate import cuda_arch, prepare

    capability = None
    if device.startswith("cuda"):
        import torch

        capability = torch.cuda.get_device_capability(torch.device(device))
    prepared = prepare(definition, solution, arch=cuda_arch(capability), timeout=timeout_s, scratch=scratch)
    if prepared.task_error:
        return PreparedCandidate(None, None, prepared.task_error)
    if prepared.load is None:
        status = prepared.status.value if prepared.status is not None else "COMPILE_ERROR"
        return PreparedCandidate(None, f"the candidate did not build ({status}):\n{prepared.log}", None)
    return PreparedCandidate(prepared.load, None, None)


def write_request(workdir: Path, name: str, request: dict[str, Any]) -> Path:
    """Write a runner request JSON into ``workdir`` and return its path."""
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    return path


def runner_argv(request_path: Path) -> list[str]:
    """The command that runs the candidate runner on ``request_path``."""
    return [sys.executable, "-m", "fibserve.tools.runner", str(request_path)]
