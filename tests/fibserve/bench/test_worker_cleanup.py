"""A retired worker leaves nothing in /dev/shm that it held, and removes nothing it did not hold.

Inside a PID namespace every worker has the same pid, so its files (torch's CUDA IPC reference counters, the
driver's ``cuda.shm.*`` segments) are found by what the worker has mapped or open, and removed only while
they are still the same file (same inode).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fibserve.bench.sandbox import WorkerPool, _remove_shm, _shm_files

SHM = Path("/dev/shm")


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")
def test_files_a_process_holds_are_removed_by_inode(tmp_path: Path) -> None:
    held = SHM / f"torch_2_{os.getpid()}_0"  # the name a namespaced worker (pid 2) would use
    other = SHM / f"torch_2_{os.getpid()}_1"
    try:
        held.write_bytes(b"x")
        other.write_bytes(b"y")
        with open(held, "rb"):
            files = _shm_files([os.getpid()])
        assert files == {str(held): held.stat().st_ino}
        held.unlink()
        held.write_bytes(b"z")  # a new file under the same name belongs to someone else now
        _remove_shm(files)
        assert held.exists() and other.exists()
        _remove_shm({str(other): other.stat().st_ino}, keep={str(other): other.stat().st_ino})
        assert other.exists()  # a live worker holds it (two namespaced workers' names can collide)
        _remove_shm({str(other): other.stat().st_ino})
        assert not other.exists()
    finally:
        held.unlink(missing_ok=True)
        other.unlink(missing_ok=True)


def test_a_cpu_worker_sees_a_private_dev_shm() -> None:
    pool = WorkerPool("cpu", spares=0)
    worker = pool.acquire(120)
    try:
        marker = f"fibserve-shm-probe-{os.getpid()}"
        (SHM / marker).write_bytes(b"host")
        inside = worker.host_path(Path("/dev/shm"))
        assert not (inside / marker).exists()
    finally:
        (SHM / marker).unlink(missing_ok=True)
        worker.kill()
        pool.close()


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")
def test_a_held_file_already_unlinked_is_not_listed() -> None:
    """A POSIX semaphore (``sem.*``) is unlinked while held: /proc says ``(deleted)`` and nothing is left to remove
    (a CI run listed one a multiprocessing test had left in the process)."""
    gone = SHM / f"fibserve_test_unlinked_{os.getpid()}"
    gone.write_bytes(b"x")
    with open(gone, "rb"):
        gone.unlink()
        assert not any("fibserve_test_unlinked" in name for name in _shm_files([os.getpid()]))
