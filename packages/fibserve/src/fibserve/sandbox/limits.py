"""Resource limits of one sandboxed process tree, and how a limit that was hit is named.

Each limit is enforced by the kernel where it can be, by the host-side watchdog where it cannot:

| limit | enforced by |
| --- | --- |
| memory | cgroup v2 ``memory.max`` (swap 0, whole group killed), else cgroup v1 ``memory.limit_in_bytes``, else the watchdog summing the tree's anonymous RSS |
| processes | cgroup ``pids.max`` (v2 or v1), else the watchdog counting the tree's threads |
| file size | ``RLIMIT_FSIZE`` (every file one process writes) |
| disk | the size of the private tmpfs that is the work dir (``ENOSPC`` past it) |
| CPU time | ``RLIMIT_CPU`` per process (SIGXCPU, then SIGKILL 5 s later) |
| output | the host reads the tree's stdout/stderr through a pipe and kills it past ``output_bytes`` |

``RLIMIT_AS`` is not used: a CUDA context reserves far more address space than it touches, and any useful
address-space limit breaks CUDA. ``RLIMIT_NPROC`` is not used either: the kernel exempts uid 0, which the
sandbox's user namespace maps to when the service runs as root.
"""

from __future__ import annotations

import errno
import signal
from dataclasses import dataclass, replace
from enum import StrEnum

GiB = 1 << 30
MiB = 1 << 20


class LimitName(StrEnum):
    """The limits a candidate can hit (names used in results: ``limit exceeded: memory ...``)."""

    MEMORY = "memory"
    PROCESSES = "processes"
    FILE_SIZE = "file_size"
    DISK = "disk"
    CPU_TIME = "cpu_time"
    OUTPUT = "output"


@dataclass(frozen=True)
class Limits:
    """Limits of one sandbox (None: not limited). Byte counts in bytes, times in seconds."""

    memory_bytes: int | None = 16 * GiB
    """Host memory of the whole tree (anonymous memory, page cache it caused, its tmpfs)."""
    processes: int | None = 1024
    """Tasks (processes and threads) alive at once; torch and the CUDA driver start tens of threads."""
    file_bytes: int | None = 1 * GiB
    """Largest file any process of the tree may write (``RLIMIT_FSIZE``)."""
    disk_bytes: int | None = 2 * GiB
    """Size of the private work dir (a tmpfs; it is memory too, so keep it below ``memory_bytes``)."""
    cpu_s: int | None = 3600
    """CPU seconds per process (``RLIMIT_CPU``); wall-clock timeouts per call are separate and tighter."""
    output_bytes: int | None = 16 * MiB
    """Bytes the tree may print (stdout and stderr together)."""

    def with_(self, **changes: int | None) -> Limits:
        """A copy with some limits changed."""
        return replace(self, **changes)


WORKER_LIMITS = Limits()
"""Defaults of an evaluation worker (a candidate's or the reference's twin)."""

BUILD_LIMITS = Limits(memory_bytes=16 * GiB, cpu_s=None, disk_bytes=4 * GiB)
"""Defaults of one compiler run (``cpu_s`` follows the build's time limit)."""


@dataclass(frozen=True)
class LimitHit:
    """A limit the sandbox hit: which, and how it was seen."""

    limit: LimitName
    detail: str
    """E.g. ``16.0 GiB (cgroup v2 memory.max, oom_kill 1)``."""

    def sentence(self) -> str:
        """``limit exceeded: memory (16.0 GiB ...)``: the first line of the candidate's log."""
        return f"limit exceeded: {self.limit.value} ({self.detail})"


def size_text(nbytes: int | None) -> str:
    """``16.0 GiB``, ``512 MiB`` or ``unlimited``."""
    if nbytes is None:
        return "unlimited"
    if nbytes >= GiB:
        return f"{nbytes / GiB:.1f} GiB"
    return f"{nbytes / MiB:.0f} MiB"


def limit_of_errno(number: int | None, limits: Limits) -> LimitHit | None:
    """The limit an ``OSError`` errno means inside a sandbox: ``EFBIG`` is the file-size limit, ``ENOSPC`` the
    disk limit (the work dir is the only writable file system besides the buffers)."""
    if number == errno.EFBIG:
        return LimitHit(LimitName.FILE_SIZE, f"{size_text(limits.file_bytes)} per file (RLIMIT_FSIZE)")
    if number == errno.ENOSPC:
        return LimitHit(LimitName.DISK, f"{size_text(limits.disk_bytes)} work dir")
    return None


def limit_of_exit(returncode: int | None, limits: Limits) -> LimitHit | None:
    """The limit an exit status means: death by SIGXCPU (CPU time) or SIGXFSZ (file size). bubblewrap reports
    a child's death by signal N as exit status 128 + N; a plain child reports -N."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number == signal.SIGXCPU:
        return LimitHit(LimitName.CPU_TIME, f"{limits.cpu_s} CPU s per process (RLIMIT_CPU)")
    if number == signal.SIGXFSZ:
        return LimitHit(LimitName.FILE_SIZE, f"{size_text(limits.file_bytes)} per file (RLIMIT_FSIZE)")
    return None
