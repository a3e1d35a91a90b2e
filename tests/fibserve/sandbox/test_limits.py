"""Each resource limit stops a sandboxed process tree and is named; without a cgroup the watchdog does it.

Small limits keep these fast: each runs a few lines of Python that exceed one limit.
"""

from __future__ import annotations

import sys

import pytest
from fibserve import sandbox
from fibserve.sandbox import LimitName, Limits, cgroup

MiB = 1 << 20


def _run(code: str, **limits: int) -> sandbox.Completed:
    return sandbox.run(
        [sys.executable, "-c", code],
        mounts=sandbox.Mounts(python=True),
        limits=Limits(**limits),
        timeout_s=60,
    )


@pytest.fixture(params=["cgroup", "watchdog"])
def enforcement(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each memory and process test runs twice: with the machine's cgroup, and with none (the watchdog)."""
    if request.param == "watchdog":
        monkeypatch.setattr(cgroup, "create", lambda limits: None)
    elif cgroup.create(Limits()) is None:
        pytest.skip("no writable cgroup (v2 or v1) on this machine")
    return request.param


def test_memory(enforcement: str) -> None:
    done = _run("import time\nx = bytearray(600 << 20)\ntime.sleep(5)", memory_bytes=256 * MiB)
    assert done.limit is not None and done.limit.limit is LimitName.MEMORY, (done.limit, done.output)
    assert done.returncode != 0


def test_processes(enforcement: str) -> None:
    code = "import os, time\nfor _ in range(300):\n    if os.fork() == 0:\n        time.sleep(5)\n        os._exit(0)\ntime.sleep(5)\n"
    done = _run(code, processes=64)
    assert done.limit is not None and done.limit.limit is LimitName.PROCESSES, (done.limit, done.output)


def test_file_size() -> None:
    done = _run("open('/tmp/big', 'wb').write(b'x' * (64 << 20))", file_bytes=16 * MiB)
    assert "File too large" in done.output
    assert sandbox.limit_of_errno(27, Limits(file_bytes=16 * MiB)).limit is LimitName.FILE_SIZE


def test_disk_use_of_the_work_dir() -> None:
    code = "for i in range(10):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * (8 << 20))"
    done = _run(code, disk_bytes=32 * MiB)
    assert "No space left on device" in done.output
    assert sandbox.limit_of_errno(28, Limits()).limit is LimitName.DISK


def test_cpu_time() -> None:
    done = _run("while True:\n    pass", cpu_s=1)
    assert done.limit is not None and done.limit.limit is LimitName.CPU_TIME
    assert "1 CPU s" in done.limit.sentence()


def test_bytes_printed_are_capped_and_only_the_ends_kept() -> None:
    done = _run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", output_bytes=1 * MiB)
    assert done.limit is not None and done.limit.limit is LimitName.OUTPUT
    assert len(done.output) < 200_000  # the first and last 64 KiB, not the megabyte
