"""The one switch: is candidate code confined by bubblewrap, explicitly unconfined, or refused?

Every process that runs or compiles candidate code (the evaluation workers, nvcc, the Triton JIT inside the
workers, compute-sanitizer and ncu) asks :func:`status` before it starts. There are three answers:

- ``bwrap``: bubblewrap is installed and can create the sandbox's namespaces here;
- ``unsafe-none``: the operator asked for no sandbox (``--unsafe-no-sandbox``, which sets
  ``FIBSERVE_UNSAFE_NO_SANDBOX=1``); candidates run as plain child processes, still under the resource limits,
  and every result says so;
- ``unavailable``: no usable bubblewrap and no explicit opt-out; nothing is executed or compiled, and the
  error says how to install it.

No code path falls back from ``bwrap`` to ``unsafe-none`` on its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

UNSAFE_ENV = "FIBSERVE_UNSAFE_NO_SANDBOX"
"""Set to ``1`` to run candidates without bubblewrap (what ``--unsafe-no-sandbox`` does)."""

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora/RHEL: `dnf install bubblewrap`) "
    "and allow unprivileged user namespaces, or, only where every candidate is trusted, start with "
    f"--unsafe-no-sandbox ({UNSAFE_ENV}=1)"
)

UNSAFE_NOTE = (
    "UNSAFE: no sandbox (--unsafe-no-sandbox): candidate code ran as a plain child process of the service, "
    "able to read its files and environment and to reach the network"
)
"""The sentence every result carries when candidates ran without bubblewrap."""

Mode = Literal["bwrap", "unsafe-none", "unavailable"]


class SandboxUnavailable(RuntimeError):
    """Candidate code cannot be confined here and the operator did not opt out; the message says what to do."""


@dataclass(frozen=True)
class SandboxStatus:
    """How candidate code is run on this machine (see the module docstring)."""

    mode: Mode
    """``bwrap``, ``unsafe-none`` or ``unavailable``."""
    bwrap: str | None
    """Path of the bubblewrap executable, when one was found."""
    detail: str
    """One sentence for logs, ``/health`` and results."""

    @property
    def usable(self) -> bool:
        """Whether candidates may be run at all."""
        return self.mode != "unavailable"

    def as_dict(self) -> dict[str, str | None]:
        """``{mode, bwrap, detail}`` for JSON answers."""
        return {"mode": self.mode, "bwrap": self.bwrap, "detail": self.detail}


def unsafe_requested() -> bool:
    """Whether ``FIBSERVE_UNSAFE_NO_SANDBOX`` asks for no sandbox (``1``, ``true`` or ``yes``)."""
    return os.environ.get(UNSAFE_ENV, "").strip().lower() in ("1", "true", "yes")


def allow_unsafe() -> None:
    """Turn the sandbox off for this process and its children (the ``--unsafe-no-sandbox`` options)."""
    os.environ[UNSAFE_ENV] = "1"
    status.cache_clear()


# The namespaces every sandbox uses, so the probe fails exactly where a real sandbox would.
PROBE_ARGV = ("--unshare-all", "--uid", "65534", "--gid", "65534", "--die-with-parent", "--ro-bind", "/", "/")


@lru_cache(maxsize=1)
def status() -> SandboxStatus:
    """The sandbox mode of this process (cached; :func:`allow_unsafe` and tests clear the cache)."""
    bwrap = shutil.which("bwrap")
    if unsafe_requested():
        return SandboxStatus("unsafe-none", bwrap, UNSAFE_NOTE)
    if bwrap is None:
        return SandboxStatus(
            "unavailable",
            None,
            f"bubblewrap (bwrap) is not installed, so candidates are not run: {INSTALL_HINT}",
        )
    try:
        probe = subprocess.run([bwrap, *PROBE_ARGV, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxStatus(
            "unavailable", bwrap, f"bubblewrap at {bwrap} does not run ({exc}): {INSTALL_HINT}"
        )
    if probe.returncode != 0:
        reason = (probe.stderr or probe.stdout).strip()[:300]
        return SandboxStatus(
            "unavailable",
            bwrap,
            f"bubblewrap at {bwrap} cannot create its namespaces here ({reason}); a container needs "
            f"user namespaces allowed (e.g. docker --security-opt seccomp=unconfined): {INSTALL_HINT}",
        )
    return SandboxStatus(
        "bwrap", bwrap, f"bubblewrap ({bwrap}): own PID/IPC/network/mount/user namespaces, allowlisted mounts"
    )


def require() -> SandboxStatus:
    """The status when candidates may run.

    Raises:
        SandboxUnavailable: no usable bubblewrap and no ``--unsafe-no-sandbox``.
    """
    current = status()
    if not current.usable:
        raise SandboxUnavailable(current.detail)
    return current
