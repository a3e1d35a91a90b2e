"""A control group per sandbox: hard memory and process limits where this machine lets us make one.

cgroup v2 (the H200 hosts: memory and pids controllers at ``/sys/fs/cgroup``): the sandbox's group is made
under the service's own cgroup when that one delegates ``memory`` and ``pids`` to its children, else under the
nearest ancestor that does, else under the root of the hierarchy (always allowed for root), with
``memory.max``, ``memory.swap.max = 0``, ``memory.oom.group = 1`` (an OOM kills the whole tree) and
``pids.max``. cgroup v1 (this project's CPU machine: ``memory`` and ``pids`` hierarchies): one group per
controller under the service's own group, with ``memory.limit_in_bytes`` (and ``memsw``, no swap) and
``pids.max``. Where neither can be made (no permission, a container without delegation), :func:`create`
returns None and :mod:`fibserve.sandbox.watchdog` enforces the limits from outside.

The sandbox's launcher (:mod:`fibserve.sandbox.launch`) writes its own pid into ``cgroup.procs`` before it
executes bubblewrap, so every process of the tree starts inside the group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .limits import LimitHit, LimitName, Limits, size_text

ROOT = Path("/sys/fs/cgroup")


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per hierarchy: ``{"": "/a/b"}`` for v2, ``{"memory": ..., "pids": ...}``."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _delegates(directory: Path) -> bool:
    try:
        enabled = set((directory / "cgroup.subtree_control").read_text().split())
    except OSError:
        return False
    return {"memory", "pids"} <= enabled


@lru_cache(maxsize=1)
def _v2_parent() -> Path | None:
    """Where v2 sandbox groups go (see the module docstring), or None without a usable v2 hierarchy."""
    for mount in (ROOT, ROOT / "unified"):
        try:
            available = set((mount / "cgroup.controllers").read_text().split())
        except OSError:
            continue
        if not {"memory", "pids"} <= available:
            continue
        own = mount / _own_paths().get("", "/").lstrip("/")
        chain = [own, *own.parents]
        for directory in chain[: chain.index(mount) + 1] if mount in chain else [mount]:
            if _delegates(directory):
                return directory
        if _write(mount / "cgroup.subtree_control", "+memory +pids"):
            return mount
    return None


@lru_cache(maxsize=1)
def _v1_parents() -> dict[str, Path]:
    """``{"memory": dir, "pids": dir}``: the service's own v1 groups that exist and are writable."""
    own = _own_paths()
    found = {}
    for controller in ("memory", "pids"):
        directory = ROOT / controller / own.get(controller, "/").lstrip("/")
        if controller in own and (directory / "cgroup.procs").exists() and os.access(directory, os.W_OK):
            found[controller] = directory
    return found


@dataclass
class Cgroup:
    """The group(s) of one sandbox; ``memory``/``pids`` are the directories holding each controller."""

    version: int
    limits: Limits
    memory: Path | None = None
    pids: Path | None = None
    made: list[Path] = field(default_factory=list)

    @property
    def procs_files(self) -> list[str]:
        """Files the launcher writes its pid into."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(d for d in (self.memory, self.pids) if d)]

    def adopt(self, pid: int) -> None:
        """Move the running process ``pid`` (a host pid) into the group(s) (a worker forked outside the
        launcher, :mod:`fibserve.bench.worker.zygote`).

        Raises:
            OSError: the kernel refused (the process is gone, or the group cannot take it).
        """
        for procs in self.procs_files:
            Path(procs).write_text(f"{pid}\n")

    def _counter(self, file: Path, key: str) -> int:
        with contextlib.suppress(OSError, ValueError):
            for line in file.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        return 0

    def hit(self) -> LimitHit | None:
        """The memory or process limit, if the kernel reports that the tree ran into it."""
        if self.memory is not None:
            events = "memory.events" if self.version == 2 else "memory.oom_control"
            kills = self._counter(self.memory / events, "oom_kill")
            if kills:
                return LimitHit(
                    LimitName.MEMORY,
                    f"{size_text(self.limits.memory_bytes)} (cgroup v{self.version}, {kills} OOM kill(s))",
                )
        if self.pids is not None and (refused := self._counter(self.pids / "pids.events", "max")):
            return LimitHit(
                LimitName.PROCESSES,
                f"{self.limits.processes} tasks (cgroup v{self.version} pids.max, {refused} fork(s) refused)",
            )
        return None

    def kill(self) -> None:
        """SIGKILL every process left in the group(s)."""
        for directory in self.made:
            if self.version == 2 and _write(directory / "cgroup.kill", "1"):
                continue
            with contextlib.suppress(OSError, ValueError):
                for pid in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill what is left and remove the group(s); a group that stays busy past ``wait_s`` is left behind."""
        self.kill()
        deadline = time.monotonic() + wait_s
        for directory in self.made:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
        self.made = []


def _make(parent: Path, name: str, settings: list[tuple[str, str]]) -> Path | None:
    directory = parent / name
    try:
        directory.mkdir()
    except OSError:
        return None
    for file, value in settings:
        if (directory / file).exists() and not _write(directory / file, value):
            with contextlib.suppress(OSError):
                directory.rmdir()
            return None
    return directory


def create(limits: Limits) -> Cgroup | None:
    """A fresh group for one sandbox with ``limits``' memory and process limits, or None where no group can
    be made here (the watchdog then enforces both)."""
    name = f"fibserve-{os.getpid()}-{uuid.uuid4().hex[:10]}"
    memory = str(limits.memory_bytes) if limits.memory_bytes is not None else "max"
    pids = str(limits.processes) if limits.processes is not None else "max"
    parent = _v2_parent()
    if parent is not None:
        settings = [
            ("memory.max", memory),
            ("memory.swap.max", "0"),
            ("memory.oom.group", "1"),
            ("pids.max", pids),
        ]
        directory = _make(parent, name, settings)
        if directory is not None:
            return Cgroup(2, limits, memory=directory, pids=directory, made=[directory])
    v1 = _v1_parents()
    if not v1:
        return None
    group = Cgroup(1, limits)
    if "memory" in v1 and limits.memory_bytes is not None:
        settings = [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)]
        group.memory = _make(v1["memory"], name, settings)
    if "pids" in v1 and limits.processes is not None:
        group.pids = _make(v1["pids"], name, [("pids.max", pids)])
    group.made = [d for d in (group.memory, group.pids) if d is not None]
    return group if group.made else None
