"""The seccomp filter of a GPU worker (which shares its zygote's PID namespace) keeps its signals to itself.

Each attempt is made twice by a forked child, against a live process of the same user (what a sibling worker
or the zygote is to a GPU worker): before the filter, where it must succeed (else the test proves nothing),
and after it, where the kernel must answer EPERM.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import threading

import pytest
from fibserve.sandbox.signal_filter import X32_SYSCALL_BIT, forbid_signals_to_others

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"), reason="Linux seccomp"
)


def _attempts(victim: int) -> dict[str, str]:
    """What each way of reaching ``victim`` gave: ``ok`` or the errno's name."""
    libc = ctypes.CDLL(None, use_errno=True)

    def attempt(action) -> str:
        try:
            action()
            return "ok"
        except OSError as exc:
            return os.strerror(exc.errno) if exc.errno else str(exc)

    def pidfd_signal() -> None:
        handle = os.open(f"/proc/{victim}", os.O_RDONLY | os.O_DIRECTORY)
        try:
            signal.pidfd_send_signal(handle, 0)
        finally:
            os.close(handle)

    def x32_kill() -> None:
        if libc.syscall(62 | X32_SYSCALL_BIT, victim, 0) != 0:
            raise OSError(ctypes.get_errno(), "x32 kill")

    results = {
        "kill": attempt(lambda: os.kill(victim, 0)),
        "kill everyone": attempt(lambda: os.kill(-1, 0)),
        "pidfd_open": attempt(lambda: os.close(os.pidfd_open(victim))),
        "pidfd of /proc/PID": attempt(pidfd_signal),
        "its own thread (tgkill)": attempt(lambda: signal.pthread_kill(threading.get_ident(), 0)),
        "itself": attempt(lambda: os.kill(os.getpid(), 0)),
        "its process group": attempt(lambda: os.kill(0, 0)),
    }
    if platform.machine() == "x86_64":
        results["x32 kill"] = attempt(x32_kill)
    return results


def _in_child(filtered: bool, victim: int) -> dict[str, str]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            if filtered:
                forbid_signals_to_others()
            os.write(write, json.dumps(_attempts(victim)).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 4096):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def victim():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def test_without_the_filter_every_attempt_reaches_the_other_process(victim: int) -> None:
    results = _in_child(False, victim)
    assert results["kill"] == results["pidfd_open"] == results["pidfd of /proc/PID"] == "ok", results


def test_with_the_filter_only_the_process_itself_can_be_signalled(victim: int) -> None:
    results = _in_child(True, victim)
    refused = os.strerror(1)  # EPERM
    for name in ("kill", "kill everyone", "pidfd_open", "pidfd of /proc/PID"):
        assert results[name] == refused, (name, results)
    if "x32 kill" in results:  # refused by the filter, or by a kernel without the x32 ABI
        assert results["x32 kill"] != "ok", results
    assert results["itself"] == results["its process group"] == results["its own thread (tgkill)"] == "ok", (
        results
    )
