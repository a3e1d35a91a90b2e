"""A retired worker leaves nothing in /dev/shm: torch's IPC reference counters and the CUDA driver's
interprocess-event segments named after its pid are removed; other pids' files, and files older than the
worker (an earlier process with the same pid), are not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fibserve.bench.sandbox import WorkerPool

SHM = Path("/dev/shm")


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")
def test_kill_removes_the_workers_shm_leftovers_only(tmp_path):
    pool = WorkerPool("cpu", sandbox="none", spares=0, root_dir=tmp_path)
    worker = pool.acquire(120)
    pid = worker.ready["pid"]
    theirs = [SHM / f"torch_{pid}_12345_0", SHM / f"cuda.shm.0.{pid:x}.1"]
    other = SHM / f"cuda.shm.0.{pid:x}0.1"  # another pid whose hex form starts with this one's
    older = SHM / f"torch_{pid}_999_0"  # left by an earlier process that had the same pid
    try:
        for path in [*theirs, other, older]:
            path.write_bytes(b"x")
        os.utime(older, (time.time() - 3600, time.time() - 3600))
        worker.kill()
        assert not worker.alive
        assert [p for p in theirs if p.exists()] == []
        assert other.exists() and older.exists()
    finally:
        for path in [*theirs, other, older]:
            path.unlink(missing_ok=True)
        pool.close()
