"""The host side's watch over running sandboxes: their output, and the limits no cgroup enforces.

:class:`OutputCapture` reads a sandbox's stdout and stderr from a pipe, keeps the first and the last 64 KiB
in memory (nothing goes to disk) and reports when the tree printed more than its limit. :data:`WATCHDOG` is
one thread that looks at every live sandbox ten times a second: the cgroup's counters where there is a
cgroup (an OOM kill, a refused fork), else the tree's own numbers from ``/proc`` (anonymous resident memory
and tasks, summed over every process below the sandbox's first process); a sandbox past a limit is killed
whole. Without a cgroup the limits are therefore approximate: a tree can overshoot for up to one tick.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

KEEP_BYTES = 64 << 10
"""How much of the start and of the end of a sandbox's output is kept."""

_PAGE = os.sysconf("SC_PAGE_SIZE")


class OutputCapture:
    """Drains ``fd`` in a thread; calls ``on_limit`` once when more than ``limit_bytes`` arrived."""

    def __init__(self, fd: int, limit_bytes: int | None, on_limit: Callable[[], None]):
        self.total = 0
        self.limit_bytes = limit_bytes
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self._on_limit = on_limit
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, args=(fd,), name="sandbox-output", daemon=True)
        self._thread.start()

    def _drain(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 1 << 16):
                self._keep(chunk)
                if self.limit_bytes is not None and self.total > self.limit_bytes and self._on_limit:
                    callback, self._on_limit = self._on_limit, None
                    callback()
        except OSError:
            pass
        finally:
            os.close(fd)

    def _keep(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            if len(self._head) < KEEP_BYTES:
                self._head += chunk[: KEEP_BYTES - len(self._head)]
            self._tail.append(chunk)
            self._tail_bytes += len(chunk)
            while self._tail_bytes - len(self._tail[0]) >= KEEP_BYTES:
                self._tail_bytes -= len(self._tail.popleft())

    def join(self, timeout: float = 5.0) -> None:
        """Wait until the pipe is closed (every process of the tree is gone) or ``timeout`` seconds."""
        self._thread.join(timeout)

    def tail(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes printed, decoded."""
        with self._lock:
            data = b"".join(self._tail)[-limit:]
        return data.decode("utf-8", "replace")

    def text(self) -> str:
        """What was printed: all of it when short, else the first and last 64 KiB with the cut marked."""
        with self._lock:
            tail = b"".join(self._tail)[-KEEP_BYTES:]  # the chunks kept reach up to one read further back
            if self.total <= len(tail):
                return tail.decode("utf-8", "replace")
            cut = self.total - len(self._head) - len(tail)
            head = bytes(self._head)
        if cut <= 0:
            overlap = len(head) + len(tail) - self.total
            return (head + tail[overlap:]).decode("utf-8", "replace")
        marker = f"\n... [{cut} bytes of output not kept] ...\n".encode()
        return (head + marker + tail).decode("utf-8", "replace")


def tree_pids(root: int) -> list[int]:
    """``root`` and every live process below it (from each task's ``/proc/<pid>/task/<tid>/children``)."""
    found: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.append(pid)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    stack.extend(int(c) for c in (task / "children").read_text().split())
    return found


def tree_usage(root: int) -> tuple[int, int]:
    """``(anonymous resident bytes, tasks)`` summed over ``root`` and every process below it."""
    memory = tasks = 0
    for pid in tree_pids(root):
        proc = Path(f"/proc/{pid}")
        with contextlib.suppress(OSError, ValueError, IndexError):
            resident, shared = (int(x) for x in (proc / "statm").read_text().split()[1:3])
            memory += max(0, resident - shared) * _PAGE
            tasks += int((proc / "stat").read_text().rsplit(")", 1)[1].split()[17])
    return memory, tasks


class Watched(Protocol):
    """What the watchdog needs from a sandbox."""

    def check_limits(self) -> bool:
        """Look at the limits once; return False when the sandbox is finished (stop watching it)."""
        ...


class Watchdog:
    """One daemon thread polling every watched sandbox each ``interval_s`` seconds."""

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self._watched: set[Watched] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, sandbox: Watched) -> None:
        """Start watching ``sandbox`` (starts the thread on first use)."""
        with self._lock:
            self._watched.add(sandbox)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sandbox-watchdog", daemon=True)
                self._thread.start()

    def forget(self, sandbox: Watched) -> None:
        """Stop watching ``sandbox``."""
        with self._lock:
            self._watched.discard(sandbox)

    def _loop(self) -> None:
        while True:
            with self._lock:
                watched = list(self._watched)
            for sandbox in watched:
                try:
                    alive = sandbox.check_limits()
                except Exception:  # a watchdog that dies would leave every later sandbox unwatched
                    alive = True
                if not alive:
                    self.forget(sandbox)
            time.sleep(self.interval_s)


WATCHDOG = Watchdog()
