"""Run a build command in a child process with a timeout, resource limits and (where present) bubblewrap.

The service process never compiles anything itself: a hostile source can make a compiler loop, eat memory
or (through ``#include`` of device files, or a host-side build script) try to reach the network. The child
gets RLIMIT_CPU, RLIMIT_AS and RLIMIT_FSIZE, runs in its own session so a timeout kills the whole process
group, and, when ``bwrap`` is installed and works, sees a read-only root, a private ``/tmp``, no network and
only its build directory writable, with the service user's home hidden (as for the candidate's worker). The
environment is reduced to what compilers need (:func:`minimal_env`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

SandboxMode = Literal["auto", "bwrap", "none"]


@dataclass
class Limits:
    """Resource limits for one build command."""

    timeout_s: float = 300.0
    """Wall-clock limit in seconds; the process group is killed when it passes."""
    cpu_s: int | None = None
    """RLIMIT_CPU per process in seconds (default: the wall-clock limit)."""
    memory_bytes: int | None = 16 << 30
    """RLIMIT_AS per process; 16 GiB leaves room for cicc/ptxas on large templates."""
    file_bytes: int | None = 2 << 30
    """RLIMIT_FSIZE: the largest file the command may write (a runaway ``-keep`` or a disk bomb)."""


@dataclass
class SandboxResult:
    """What a sandboxed command did."""

    returncode: int | None
    """Exit status; None when it was killed for the timeout."""
    output: str
    """stdout and stderr, interleaved."""
    timed_out: bool
    wall_ms: float
    sandbox: str
    """``bwrap`` or ``none``."""

    @property
    def killed_by_signal(self) -> bool:
        """Whether the command died from a signal (CPU or memory limit, or a crash)."""
        return self.returncode is not None and self.returncode < 0


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """Whether ``bwrap`` is installed and can create its namespaces here (containers may forbid it)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--die-with-parent", "true"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def resolve_mode(mode: SandboxMode | None = None) -> str:
    """``bwrap`` or ``none``: ``mode`` or ``FIBSERVE_SANDBOX``; ``auto`` uses bwrap when it works.

    Raises:
        RuntimeError: ``bwrap`` was demanded but is not usable here.
    """
    mode = mode or os.environ.get("FIBSERVE_SANDBOX", "auto")  # type: ignore[assignment]
    if mode == "none":
        return "none"
    if bwrap_works():
        return "bwrap"
    if mode == "bwrap":
        raise RuntimeError("FIBSERVE_SANDBOX=bwrap but bubblewrap is missing or cannot run here")
    return "none"


def _bwrap_prefix(writable: list[Path], readable: list[Path]) -> list[str]:
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
    ]  # fmt: skip
    # The service user's home (keys, tokens, caches) is hidden: `#include "~/.ssh/id_rsa"` would otherwise
    # print the file back in the compiler's error messages.
    home = Path(os.environ.get("HOME", "/")).resolve()
    if home != Path("/"):
        argv += ["--tmpfs", str(home)]
    # Paths under /tmp or the home vanish behind the tmpfs mounts; bind them back (read-only unless writable).
    # Everything else is already visible through the read-only root, and binding it again would fail where a
    # parent is a symbolic link (bwrap cannot create the mount point: seen with /usr/local/cuda on the H200).
    hidden = [Path("/tmp"), *([home] if home != Path("/") else [])]
    for path in under_hidden_roots(readable, hidden):
        argv += ["--ro-bind", str(path), str(path)]
    for path in writable:
        argv += ["--bind", str(path), str(path)]
    return argv


def under_hidden_roots(paths: Sequence[Path | str], hidden: Sequence[Path]) -> list[Path]:
    """The existing ``paths`` (resolved, deduplicated, in order) that lie under one of the ``hidden`` roots.

    Used to re-expose, inside a bubblewrap sandbox, the few directories that a tmpfs over ``/tmp`` or the home
    directory would otherwise hide (a build cache or a site-packages directory placed there).
    """
    kept: list[Path] = []
    for raw in paths:
        path = Path(raw).resolve()
        if path.exists() and path not in kept and any(path.is_relative_to(root) for root in hidden):
            kept.append(path)
    return kept


_ENV_KEPT = ("PATH", "LANG", "LC_ALL", "TMPDIR", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "HOME")


def minimal_env() -> dict[str, str]:
    """The environment a build command gets: what compilers need, nothing else.

    The service's own environment may hold API keys; ``#include "/proc/self/environ"`` would print it into
    the compile log, which goes back to the model.
    """
    return {name: os.environ[name] for name in _ENV_KEPT if name in os.environ}


def _set_limits(limits: Limits) -> None:
    """Runs in the child between fork and exec."""
    cpu = limits.cpu_s if limits.cpu_s is not None else int(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.file_bytes is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))


def run_sandboxed(
    argv: list[str],
    *,
    cwd: Path,
    writable: list[Path],
    readable: Sequence[Path] = (),
    limits: Limits | None = None,
    mode: SandboxMode | None = None,
    env: dict[str, str] | None = None,
) -> SandboxResult:
    """Run ``argv`` in a child process confined as described in the module docstring.

    Args:
        argv: the command.
        cwd: working directory (must be inside ``writable`` or readable).
        writable: directories the command may write (its build directory).
        readable: extra directories to keep visible when they live under ``/tmp``.
        limits: timeout and rlimits.
        mode: ``auto`` (default, or ``FIBSERVE_SANDBOX``), ``bwrap`` or ``none``.
        env: environment for the command (default: :func:`minimal_env`).

    Raises:
        OSError: the command could not be started at all.
    """
    limits = limits or Limits()
    sandbox = resolve_mode(mode)
    if sandbox == "bwrap":
        # Keep the program's own installation visible even when it lives under the hidden home
        # (pyenv, conda): <prefix>/bin/<tool> -> <prefix>.
        program = shutil.which(argv[0]) or argv[0]
        prefix = Path(program).resolve().parent.parent
        full = _bwrap_prefix(writable, [*readable, prefix]) + argv
    else:
        full = argv
    start = time.perf_counter()
    process = subprocess.Popen(
        full,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=minimal_env() if env is None else env,
        start_new_session=True,
        preexec_fn=lambda: _set_limits(limits),
    )
    timed_out = False
    try:
        raw, _ = process.communicate(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raw, _ = process.communicate()
    wall_ms = (time.perf_counter() - start) * 1000.0
    return SandboxResult(
        returncode=None if timed_out else process.returncode,
        output=raw.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        wall_ms=wall_ms,
        sandbox=sandbox,
    )
