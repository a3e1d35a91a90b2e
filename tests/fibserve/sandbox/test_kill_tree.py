"""A worker without a PID namespace of its own (a GPU worker) is killed with everything it started.

Its PID namespace used to end its tree (the kernel kills a namespace with its init); a GPU worker shares its
zygote's, so it is its descendants' reaper (``fibserve.sandbox.nest.become_subreaper``) and the trusted side
stops and kills the whole tree below it (``fibserve.sandbox.process.kill_tree``). A process-group kill alone
misses an orphan of a ``setsid`` double fork.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from fibserve.sandbox.process import kill_tree
from sandbox_probes import processes_with, wait_until_gone

ROOT = textwrap.dedent(
    """
    import os, sys, time
    from fibserve.sandbox import nest

    nest.become_subreaper()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
        os._exit(0)
    os.wait()

    def command(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                return handle.read()
        except OSError:
            return b""

    # ready once the orphan has exec'd: mid-exec its command line can read empty
    while not any(b"time.sleep(300)" in command(p) and sys.argv[1].encode() in command(p)
                  for p in os.listdir("/proc") if p.isdigit()):
        time.sleep(0.01)
    print("ready", flush=True)
    time.sleep(300)
    """
)


@pytest.fixture
def tree(request):
    marker = f"fibserve-tree-{os.getpid()}-{request.node.name}"
    root = subprocess.Popen(
        [sys.executable, "-c", ROOT, marker], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert root.stdout is not None and root.stdout.readline().strip() == "ready"
    yield root, marker
    root.kill()
    root.wait()
    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)


def test_a_process_group_kill_leaves_the_orphan(tree) -> None:
    root, marker = tree
    os.killpg(root.pid, signal.SIGKILL)
    root.wait()
    assert wait_until_gone(marker, timeout_s=1.0) != []  # what kill_tree is for


def test_kill_tree_kills_the_orphan_its_reaper_kept(tree) -> None:
    root, marker = tree
    kill_tree(root.pid)
    root.wait()
    assert wait_until_gone(marker) == []


def test_a_late_stop_spares_the_process_that_took_the_reaped_trees_number() -> None:
    """Once a sandbox's first process is reaped, the kernel may hand its pid to any new process (pid_max is
    32768 here); a stop after that (a cancel from another thread once the worker died) used to killpg the number
    and so a stranger's process group. The reuse is staged: the stranger's pid is put where the reaped one was."""
    from fibserve.sandbox import Mounts, Sandbox, SandboxUnavailable

    try:
        box = Sandbox([sys.executable, "-c", "pass"], mounts=Mounts(python=True))
    except SandboxUnavailable as exc:
        pytest.skip(f"needs the sandbox: {exc}")
    assert box.wait(60) == 0  # reaped here: the number is free
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        box.proc.pid = stranger.pid  # what the kernel's reuse of the number amounts to
        box.stop()
        with pytest.raises(subprocess.TimeoutExpired):
            stranger.wait(0.5)  # still running
    finally:
        stranger.kill()
        stranger.wait()
        box.close()
