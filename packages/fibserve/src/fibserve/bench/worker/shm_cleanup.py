"""Removing what a retired GPU worker left in the host's ``/dev/shm`` (trusted side).

GPU workers see the host's ``/dev/shm`` (the CUDA driver's IPC keeps ``cuda.shm.*`` segments there, docs/
security.md), and a worker killed mid-call leaves its segments behind. Which files were the worker's is
decided only from facts the kernel reports, never from what the worker shows:

- a file counts when the worker's processes have it mapped (``/proc/<pid>/maps`` gives the device and
  inode of each mapping) or open (``stat`` of ``/proc/<pid>/fd/N`` follows the descriptor to the real file),
  and it lies on the host's ``/dev/shm`` file system (same device number): the *name* a worker's maps show
  is its own view, and a CPU worker's private ``/dev/shm`` can hold a file of the same name and, stepping its
  tmpfs's inode counter, the same inode number as a host file;
- it did not exist when the worker started (a snapshot of the host's ``(device, inode)`` pairs), so a worker
  that merely opens the trusted process's or another service's file cannot get it removed;
- no live worker holds it (inside PID namespaces every worker has pid 2, and the driver names its segments
  after the pid, so two workers' names can collide), and its name is one the driver or torch gives
  (``cuda.shm.*``, ``torch_*``);
- it is removed only while the host's name still refers to that same regular file (``lstat``, no link
  followed).

What remains: between that ``lstat`` and the ``unlink`` another live GPU worker could rename a file of its own
choosing to the name; Linux has no "unlink if still this inode".
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

HOST_SHM = Path("/dev/shm")

FileId = tuple[int, int]
"""``(st_dev, st_ino)``: a file's identity as the kernel reports it."""

_OWN_NAMES = re.compile(r"^(cuda\.shm\.|torch_)[\w.\-]+$")
"""Names the CUDA driver's IPC and torch's IPC reference counters give their ``/dev/shm`` files."""


def _host_device() -> int | None:
    try:
        return os.stat(HOST_SHM).st_dev
    except OSError:
        return None


def snapshot() -> frozenset[FileId]:
    """The identities of every file in the host's ``/dev/shm`` now (empty when there is none)."""
    found = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(HOST_SHM):
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                found.add((info.st_dev, info.st_ino))
    return frozenset(found)


def held_files(pids: Iterable[int]) -> dict[FileId, str]:
    """Files on the host's ``/dev/shm`` file system that ``pids`` have mapped or open: identity -> the name
    under ``/dev/shm`` the processes show (their view, checked again before anything is removed)."""
    device = _host_device()
    if device is None:
        return {}
    found: dict[FileId, str] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                if (
                    len(fields) == 6
                    and fields[5].startswith("/dev/shm/")
                    and not fields[5].endswith(" (deleted)")
                ):
                    major, minor = (int(part, 16) for part in fields[3].split(":"))
                    if os.makedev(major, minor) == device:
                        found[(device, int(fields[4]))] = fields[5].removeprefix("/dev/shm/")
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    info = os.stat(fd)  # follows the descriptor to the file itself
                    if (
                        target.startswith("/dev/shm/")
                        and not target.endswith(" (deleted)")
                        and info.st_dev == device
                    ):
                        found[(info.st_dev, info.st_ino)] = target.removeprefix("/dev/shm/")
    return found


def remove_left_behind(
    held: dict[FileId, str], existed: frozenset[FileId], keep: Iterable[FileId] = ()
) -> list[str]:
    """Unlink the files of ``held`` (from :func:`held_files`) that were made after ``existed`` (the
    :func:`snapshot` at the worker's start), are not in ``keep`` (held by live workers), carry a driver or
    torch name, and are still that same regular file under that name; returns the names removed."""
    kept = set(keep)
    removed = []
    for identity, name in held.items():
        if identity in existed or identity in kept or "/" in name or not _OWN_NAMES.match(name):
            continue
        path = HOST_SHM / name
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) == identity:
                os.unlink(path)
                removed.append(name)
    return removed
