"""A local Ray cluster of real ``ray start`` processes for the Ray tests (lanes, experiments) and benchmark.

Each node is one ``ray start --block`` process (head or worker) in a session of its own, with a fixed small
resource set; every process it starts (GCS, raylet, agents, workers) is found again through the process
tree, so :meth:`RayCluster.stop` ends exactly the processes this cluster started (no ``ray stop``, which
would end every Ray process of the machine) and says which survived. A process is remembered by its pid and
start time (:class:`Seen`), never by its number alone: pid_max is 32768 here, and a number a Ray process had
was seen handed to another test's process, which a kill by number would end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from serve_helpers import free_port

RAY = (
    str(Path(sys.executable).with_name("ray"))
    if Path(sys.executable).with_name("ray").exists()
    else (shutil.which("ray") or "ray")
)
"""The ``ray`` command of this environment (a venv's, beside its python), else the first on PATH (the GPU run's,
installed from a wheel with ``pip --target``)."""

FAST_FAILURE_DETECTION = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
"""GCS health checks of the nodes every 0.5 s, dead after 3 misses, so a killed node is noticed in ~2 s (the
defaults take about 15 s)."""

NO_PRESTART = {"RAY_enable_worker_prestart": "0", "RAY_prestart_worker_first_driver": "0"}
"""No idle Python workers started ahead of need (each costs a Ray import; the lanes' actors start their own)."""

START_ATTEMPTS = 3
"""Tries per node: the raylet waits a fixed ~15 s for its dashboard agent to write its port file and aborts
when the agent (a Python process) is slower, which happens here under a load average above 10."""


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (the state first), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(int(stat.parent.name))
        if fields is not None:
            tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from /proc."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += tree.get(current, [])
    return out


class Seen(NamedTuple):
    """One process as it was seen: its number and its start time (clock ticks after boot, the 22nd field of
    ``/proc/<pid>/stat``), which tells it from a later process given the same number."""

    pid: int
    start: int


def identify(pids: list[int]) -> set[Seen]:
    """The processes ``pids`` name now (those already gone are left out)."""
    return {Seen(pid, int(fields[19])) for pid in pids if (fields := _stat(pid)) is not None}


def alive(proc: Seen) -> bool:
    """Whether ``proc`` still runs: its number names a process started when it was, and not a zombie."""
    fields = _stat(proc.pid)
    return fields is not None and int(fields[19]) == proc.start and fields[0] != "Z"


def send(proc: Seen, sig: int) -> None:
    """Send ``sig`` to ``proc`` if it is still there, and to nothing else: its pidfd, opened before the start
    time is checked, names that one process whatever the number comes to name later."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:
        return
    try:
        fields = _stat(proc.pid)
        if fields is not None and int(fields[19]) == proc.start:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, sig)
    finally:
        os.close(pidfd)


class RayCluster:
    """Head and worker nodes on 127.0.0.1, each a ``ray start --block`` process with its own resources."""

    def __init__(self) -> None:
        # A short folder: Ray's Unix sockets live below it and their paths are limited to 107 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
        self.port = free_port()
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.seen: set[Seen] = set()

    @property
    def address(self) -> str:
        """The head's GCS address (``host:port``)."""
        return f"127.0.0.1:{self.port}"

    def add_node(
        self, cpus: int, resources: dict[str, float], timeout_s: float = 120.0, gpus: int = 0,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:  # fmt: skip
        """Start the head (first call) or a worker node with ``cpus`` CPUs, ``gpus`` GPUs and ``resources``
        (its processes see this environment plus ``env``), and wait until it says it runs."""
        for attempt in range(1, START_ATTEMPTS + 1):
            proc, log, started = self._start_node(cpus, resources, timeout_s, gpus, env or {})
            self.seen |= started
            if "Ray runtime started" in log:
                self.nodes.append(proc)
                self.remember()
                return proc
            self.kill_tree(proc, started)
            if attempt == START_ATTEMPTS:
                raise RuntimeError(f"ray start failed {attempt} times; last log:\n{log[-4000:]}")
        raise AssertionError("unreachable")

    def _start_node(
        self, cpus: int, resources: dict[str, float], timeout_s: float, gpus: int, extra_env: dict[str, str]
    ) -> tuple:
        """One ``ray start``: (process, its log, every process seen below it while it started)."""
        head = not self.nodes
        if head:
            self.port = free_port()
        where = (
            ["--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self.temp_dir}"]
            if head
            else [f"--address={self.address}"]
        )
        cmd = [
            RAY, "start", *where, "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", f"--num-gpus={gpus}",
            f"--resources={json.dumps(resources)}", "--object-store-memory=100000000", "--disable-usage-stats",
            f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}", "--block",
        ]  # fmt: skip
        log_path = self.temp_dir / f"node-{time.monotonic_ns()}.log"
        env = {
            **os.environ,
            **FAST_FAILURE_DETECTION,
            "RAY_USAGE_STATS_ENABLED": "0",
            **NO_PRESTART,
            **extra_env,
        }
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline, started = time.monotonic() + timeout_s, set()
        while True:  # noting the processes as they appear: a failed start leaves them orphaned
            started |= identify(descendants(proc.pid))
            text = log_path.read_text(errors="replace")
            if "Ray runtime started" in text or proc.poll() is not None or time.monotonic() > deadline:
                return proc, text, started
            time.sleep(0.2)

    def remember(self) -> None:
        """Note every process the nodes have started so far (workers appear as lanes start)."""
        for node in self.nodes:
            self.seen |= identify(descendants(node.pid))

    def kill_node(self, node: subprocess.Popen[bytes]) -> None:
        """SIGKILL a node and everything it started, as when its host loses power."""
        self.kill_tree(node)

    def kill_tree(self, node: subprocess.Popen[bytes], also: set[Seen] = frozenset()) -> None:
        """SIGKILL ``node``'s process, everything below it and the processes ``also``, and reap it.

        Every process is stopped (SIGSTOP) before any is killed, as a host losing power stops them all at
        once: killed one by one, a lane's actor could outlive its sandbox worker by a moment and report the
        worker's death as the task's failure, which no real power loss lets it do."""
        stopped: set[Seen] = set()
        while (
            todo := {*identify(descendants(node.pid)), *also} - stopped
        ):  # again: one may have forked meanwhile
            for proc in todo:
                send(proc, signal.SIGSTOP)
            stopped |= todo
        self.seen |= stopped
        for proc in stopped:
            send(proc, signal.SIGKILL)
        node.wait(timeout=30)

    def stop(self, timeout_s: float = 30.0) -> list[Seen]:
        """SIGTERM every node (workers first), SIGKILL what is left after ``timeout_s``; the processes that
        survived."""
        self.remember()
        for node in reversed(self.nodes):
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(alive(proc) for proc in self.seen):
            time.sleep(0.2)
        survivors = [proc for proc in self.seen if alive(proc)]
        for proc in survivors:
            send(proc, signal.SIGKILL)
        for node in self.nodes:
            if node.poll() is None:
                node.wait(timeout=10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return survivors
