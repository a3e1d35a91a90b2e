"""Killing a worker twice closes nothing of the trusted process's a second time.

A retired worker's kill closed its reply pipe by descriptor number, and every later kill of the same worker
closed that number again: a timing twin discarding a dead worker that had been killed already (as
test_timing_loop.py's dead-twin test does), or a graceful exit's thread waking after a hard kill. By then the
kernel may have given the number to another file of this process (the next worker's pidfd, its status pipe, a
server's socket), which broke underneath its owner: the likely cause of a fresh-clone CI run where a pidfd's
``select`` failed with EBADF, a worker's exit read as a SIGKILL, and an unrelated test's socket was closed.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import pytest
from fibserve.bench.worker.pool import WorkerProcess

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def _numbers_taken_up_to(number: int) -> Iterator[list[int]]:
    """Open /dev/null until the kernel hands out ``number`` (it gives the lowest free one); yield them all,
    then close them."""
    opened: list[int] = []
    try:
        while len(opened) < 4096 and (not opened or opened[-1] < number):
            opened.append(os.open(os.devnull, os.O_RDONLY))
        yield opened
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)


def _all_open(fds: list[int]) -> bool:
    try:
        for fd in fds:
            os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_second_kill_leaves_the_files_that_took_its_descriptor_numbers_open() -> None:
    worker = WorkerProcess("cpu")
    worker.wait_ready(120)
    reply_fd = worker._rep  # the number the first kill frees
    worker.kill()
    with _numbers_taken_up_to(reply_fd) as opened:
        assert reply_fd in opened  # someone else's file holds the number now
        worker.kill()
        assert _all_open(opened)


def test_kills_from_two_threads_end_the_worker_once() -> None:
    worker = WorkerProcess("cpu")
    worker.wait_ready(120)
    threads = [threading.Thread(target=worker.kill) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not worker.alive
    with _numbers_taken_up_to(worker._rep) as opened:
        worker.kill(graceful=True)  # alive is False: no exit thread, a plain kill again
        assert _all_open(opened)
