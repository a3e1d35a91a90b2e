"""A forked worker is watched through descriptors numbered 1024 and up.

A service with many connections and files open holds descriptors past 1024 (the soft limit of open files is
often far higher, 20,000 on the development machine). ``select(2)`` refuses those (FD_SETSIZE), and the pidfd
a forked worker is watched through was tested with it: a worker started in such a service could not be waited
for or even asked whether it was alive (ValueError: filedescriptor out of range in select()).
"""

from __future__ import annotations

import contextlib
import os
import resource

import pytest
from fibserve.bench.worker.pool import WorkerProcess

pytestmark = pytest.mark.slow

HIGH = 1100


@pytest.fixture
def low_numbers_taken():
    """Every descriptor number below ``HIGH`` in use, so that the next ones opened are numbered above 1024."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH + 64:
        pytest.skip(f"the open-files limit here is {soft}: no descriptor can be numbered above 1024")
    held: list[int] = []
    while not held or held[-1] < HIGH:
        held.append(os.open(os.devnull, os.O_RDONLY))
    yield
    for fd in held:
        with contextlib.suppress(OSError):
            os.close(fd)


@pytest.mark.usefixtures("low_numbers_taken")
def test_a_worker_watched_through_descriptors_past_1024_starts_answers_and_ends() -> None:
    worker = WorkerProcess("cpu")
    assert worker.sandbox.proc._pidfd > 1024  # the case select() refused
    assert worker.wait_ready(120)["ready"] and worker.alive
    worker.kill()
    assert not worker.alive
