"""Helpers for the sandbox tests: find host processes by a marker in their command line."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """Host pids (not zombies) whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            if marker.encode() in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, timeout_s: float = 5.0) -> list[int]:
    """The processes with ``marker`` still alive after up to ``timeout_s`` seconds (empty when all died)."""
    deadline = time.monotonic() + timeout_s
    while (alive := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
