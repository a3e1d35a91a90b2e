"""The Ray test cluster remembers processes by pid and start time, and signals only the process it saw: a number
the kernel has handed to another process (another test's, running beside it) is never killed."""

from __future__ import annotations

import signal
import subprocess
import sys

from ray_cluster import Seen, alive, identify, send


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_process_is_known_by_its_start_time_not_its_number_alone() -> None:
    proc = _sleeper()
    try:
        (seen,) = identify([proc.pid])
        stranger = Seen(proc.pid, seen.start - 1)  # the same number, an earlier process that had it
        assert alive(seen) and not alive(stranger)
        send(stranger, signal.SIGKILL)
        assert proc.poll() is None  # the process now holding the number was spared
        send(seen, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert not alive(seen)  # a zombie, then gone
    finally:
        proc.kill()
        proc.wait()


def test_a_gone_process_is_neither_alive_nor_signalled() -> None:
    proc = _sleeper()
    (seen,) = identify([proc.pid])
    proc.kill()
    proc.wait()
    assert identify([proc.pid]) == set() and not alive(seen)
    send(seen, signal.SIGKILL)  # nothing to signal: no error
