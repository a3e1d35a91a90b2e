"""A killed worker's descriptors are closed once, and never read or closed after: not by a second kill, not by
a read that starts after the kill (a spare a closing pool killed, taken by a lane's ``acquire``), not under a
read that was in progress. A closed pool hands out no worker.

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
from fibserve.bench.worker.pool import WorkerError, WorkerPool, WorkerProcess

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


def test_a_killed_worker_reads_nothing_from_the_file_that_took_its_reply_pipes_number() -> None:
    """A spare killed by a closing pool before a lane's ``acquire`` read its start message: the read used the
    freed number, by then another pipe of this process, and took that pipe's line as the worker's."""
    worker = WorkerProcess("cpu")  # a spare: forked, its start message not read yet
    reply_fd = worker._rep
    worker.kill()
    read_end, write_end = os.pipe()
    os.dup2(read_end, reply_fd)  # another pipe of this process now holds the freed number
    try:
        line = b'{"ready": true, "from": "another pipe"}\n'
        os.write(write_end, line)
        with pytest.raises(WorkerError, match="killed") as refused:
            worker.wait_ready(5)
        assert refused.value.kind == "died"
        with pytest.raises(WorkerError, match="killed"):
            worker.request({"op": "ping"}, 5)
        with pytest.raises(WorkerError, match="killed"):
            worker.hand_over([write_end])
        assert worker.resync(5) is True  # nothing was left unanswered: nothing to read
        assert os.read(reply_fd, 1 << 10) == line  # the other pipe's line is still its own
    finally:
        for fd in (reply_fd, read_end, write_end):
            os.close(fd)


def test_a_kill_during_a_read_leaves_the_pipe_to_the_read(monkeypatch) -> None:
    """A kill from another thread while a read is in progress (held here in place of the real read): the pipe
    stays open until the read ends, so a read woken by its select never reads a number the kernel has given to
    another file meanwhile; the read's end closes it, once."""
    worker = WorkerProcess("cpu")
    worker.wait_ready(120)
    inside, release = threading.Event(), threading.Event()
    outcome: list[object] = []

    def held_read(timeout: float) -> dict:
        inside.set()
        release.wait(30)
        os.fstat(worker._rep)  # still this worker's pipe
        return {"held": True}

    monkeypatch.setattr(worker, "_read_line_open", held_read)
    reader = threading.Thread(target=lambda: outcome.append(worker._read_line(30)))
    reader.start()
    assert inside.wait(10)
    worker.kill()
    os.fstat(worker._rep)  # the kill left the pipe to the read in progress
    release.set()
    reader.join(30)
    assert outcome == [{"held": True}]
    with _numbers_taken_up_to(worker._rep) as opened:
        assert worker._rep in opened  # the read's end closed it, once
        worker.kill()
        assert _all_open(opened)


def test_a_closed_pool_hands_out_no_worker() -> None:
    pool = WorkerPool("cpu", spares=1)
    pool.close()
    with pytest.raises(WorkerError, match="closed") as refused:
        pool.acquire(10)
    assert refused.value.kind == "died"


def test_an_acquire_waiting_for_a_spare_the_closing_pool_cancels_gets_a_worker_error() -> None:
    """A lane's ``acquire`` took a spare still queued behind another start; the pool's ``close`` then cancelled
    it, and ``acquire`` raised the executor's CancelledError instead of the pool's own error."""
    pool = WorkerPool("cpu", spares=1)
    pool.wait_spares(120)
    pool._spares[0].result().kill()  # dead: acquire's replenish drops it and queues a new start
    gate = threading.Event()
    pool._starter.submit(gate.wait, 30)  # the starter's one thread is busy: the new spare stays queued
    closer = threading.Timer(0.5, pool.close)  # while acquire waits for the queued spare
    closer.start()
    try:
        with pytest.raises(WorkerError, match="closed") as refused:
            pool.acquire(20)
        assert refused.value.kind == "died"
    finally:
        gate.set()
        closer.join(30)
