"""One sandboxed process tree: started, watched, reached through its private work dir, and killed whole.

``Sandbox(argv, mounts=..., limits=...)`` starts ``argv`` as :mod:`fibserve.sandbox.launch` -> bubblewrap
(:mod:`fibserve.sandbox.mounts`) -> the command, with the environment of :func:`fibserve.sandbox.env.sandbox_env`,
in a cgroup where one can be made, its output drained by :class:`fibserve.sandbox.watchdog.OutputCapture`
and its limits watched by the watchdog. No host directory is shared for writing beyond the caller's
``writable`` mounts, and the service never reaches into the sandbox's own files (the candidate could have
made any path there a link): what it hands over crosses as descriptors on pipes and sockets.

Killing it (a timeout, a limit, the end of its work) kills everything it started: bubblewrap is the
process group leader, and when it dies the kernel kills its PID namespace, whose processes cannot leave it
(``setsid`` does not help); the cgroup is killed too. Under ``--unsafe-no-sandbox`` the same class runs the
command directly in a host temporary directory, still with the limits and the cgroup.

:func:`run` is the one-shot form (a compiler, a profiler): run to the end or the time limit, return what
happened.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cgroup as cgroups
from .env import sandbox_env
from .limits import WORKER_LIMITS, LimitHit, LimitName, Limits, limit_of_exit, size_text
from .mounts import WORK_DIR, Mounts, bwrap_argv, python_path
from .switch import require
from .watchdog import WATCHDOG, OutputCapture, tree_pids, tree_usage

LAUNCHER = str(Path(__file__).with_name("launch.py"))
NO_EXTRA_MOUNTS = Mounts()


class Sandbox:
    """A running sandboxed process tree (see the module docstring).

    Args:
        argv: the command (absolute executable path, or one on the sandbox's ``PATH``).
        mounts: what it sees besides the system base.
        limits: its resource limits.
        env: variables added to :func:`fibserve.sandbox.env.sandbox_env` (set by the service only).
        stdin: the child's stdin (default: nothing).
        pass_fds: further descriptors it inherits (the worker's request and reply pipes).
        cwd: its working directory, a path it sees (default: its work dir).

    Raises:
        fibserve.sandbox.SandboxUnavailable: no usable bubblewrap and no ``--unsafe-no-sandbox``.
        OSError: the launcher could not be started.
    """

    def __init__(self, argv: Sequence[str], *, mounts: Mounts = NO_EXTRA_MOUNTS, limits: Limits = WORKER_LIMITS,
                 env: Mapping[str, str] | None = None, stdin: int | None = subprocess.DEVNULL,
                 pass_fds: Sequence[int] = (), cwd: Path | None = None):  # fmt: skip
        status = require()
        self.mode = status.mode
        self.limits = limits
        self.started = time.monotonic()
        self._hit: LimitHit | None = None
        self._finished = False
        self._lock = threading.Lock()
        self._unsafe_dir = None if self.mode == "bwrap" else Path(tempfile.mkdtemp(prefix="fibserve-unsafe-"))
        self.work = WORK_DIR if self._unsafe_dir is None else self._unsafe_dir
        """The work dir as the sandboxed command sees it."""
        self.cgroup = cgroups.create(limits)
        launch = [sys.executable, "-I", "-S", LAUNCHER, *self._launch_options()]
        prefix: list[str] = []
        if self.mode == "bwrap":
            prefix = bwrap_argv(status.bwrap or "bwrap", mounts, limits, cwd or WORK_DIR)
        out_r, out_w = os.pipe()
        environment = sandbox_env(self.work, python_path=python_path() if mounts.python else None, extra=env)
        try:
            self.proc = subprocess.Popen(
                [*launch, "--", *prefix, *argv],
                stdin=stdin,
                stdout=out_w,
                stderr=out_w,
                env=environment,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
                cwd=str(cwd or self._unsafe_dir) if self._unsafe_dir is not None else "/",
            )
        except BaseException:
            os.close(out_r)
            self._release()
            raise
        finally:
            os.close(out_w)
        self.output = OutputCapture(out_r, limits.output_bytes, self._output_exceeded)
        WATCHDOG.watch(self)

    @classmethod
    def adopt(
        cls, proc: ForkedProcess, *, limits: Limits, cgroup: cgroups.Cgroup | None, output_fd: int
    ) -> Sandbox:
        """Watch, limit and kill a process tree that was not started here: a worker forked by a zygote
        (:mod:`fibserve.bench.worker.zygote`) into a sandbox of its own, already in ``cgroup``, its stdout and
        stderr going to the pipe ``output_fd`` reads. Everything else is as for a started sandbox."""
        self = cls.__new__(cls)
        self.mode = require().mode
        self.limits = limits
        self.started = time.monotonic()
        self._hit = None
        self._finished = False
        self._lock = threading.Lock()
        self._unsafe_dir = None
        self.work = WORK_DIR
        self.cgroup = cgroup
        self.proc = proc  # type: ignore[assignment]
        self.output = OutputCapture(output_fd, limits.output_bytes, self._output_exceeded)
        WATCHDOG.watch(self)
        return self

    def _launch_options(self) -> list[str]:
        options: list[str] = []
        for procs in self.cgroup.procs_files if self.cgroup else []:
            options += ["--cgroup", procs]
        if self.limits.cpu_s is not None:
            options += ["--rlimit", f"cpu={self.limits.cpu_s}"]
        if self.limits.file_bytes is not None:
            options += ["--rlimit", f"fsize={self.limits.file_bytes}"]
        return [*options, "--rlimit", "core=0"]

    @property
    def pid(self) -> int:
        """The host pid of the tree's first process (the process group leader)."""
        return self.proc.pid

    # -- limits -------------------------------------------------------------------------------------------

    def _output_exceeded(self) -> None:
        self.stop(LimitHit(LimitName.OUTPUT, f"{size_text(self.limits.output_bytes)} of stdout and stderr"))

    def check_limits(self) -> bool:
        """One watchdog look (see :mod:`fibserve.sandbox.watchdog`); False once the tree has exited."""
        if self._finished or self.proc.poll() is not None:
            return False
        hit = self.cgroup.hit() if self.cgroup else None
        memory_watched = self.cgroup is None or self.cgroup.memory is None
        pids_watched = self.cgroup is None or self.cgroup.pids is None
        if hit is None and (memory_watched or pids_watched):
            memory, tasks = tree_usage(self.proc.pid)
            limits = self.limits
            if memory_watched and limits.memory_bytes is not None and memory > limits.memory_bytes:
                hit = LimitHit(
                    LimitName.MEMORY, f"{size_text(limits.memory_bytes)} (watchdog: {size_text(memory)})"
                )
            elif pids_watched and limits.processes is not None and tasks > limits.processes:
                hit = LimitHit(LimitName.PROCESSES, f"{limits.processes} tasks (watchdog: {tasks} running)")
        if hit is not None:
            self.stop(hit)
            return False
        return True

    def limit_hit(self) -> LimitHit | None:
        """The limit that ended (or is ending) the tree, if one did."""
        if self._hit is None and self.cgroup is not None:
            self._hit = self.cgroup.hit()
        if self._hit is None and self.proc.poll() is not None:
            self._hit = limit_of_exit(self.proc.returncode, self.limits)
        return self._hit

    # -- ending it ----------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """Whether the tree's first process still runs."""
        return self.proc.poll() is None

    def stop(self, hit: LimitHit | None = None) -> None:
        """Kill the whole tree now, recording ``hit`` as the reason when it is the first.

        The tree's pid and the process group it leads are signalled by number only while they still name this
        tree: once its first process has been reaped the kernel may give the number to any new process (pid_max
        is 32768 on the development machine, and a test run starts tens of thousands), so a late stop (a cancel
        from another thread, after the worker died) would kill a stranger's process group. What is left then is
        the cgroup's to kill, and a bubblewrap tree's PID namespace died with its first process."""
        with self._lock:
            if hit is not None and self._hit is None:
                self._hit = hit
        if isinstance(self.proc, ForkedProcess):  # reaped by its own parent: alive is the only safe state
            if self.proc.poll() is None:  # no PID namespace of its own may end its tree (a GPU worker)
                kill_tree(self.proc.pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
        elif self.proc.returncode is None:  # not reaped here yet: alive, or a zombie that holds its number
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status after at most ``timeout`` seconds (None: still running)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Kill what is left, collect the output and release the cgroup and any host work dir (idempotent)."""
        if self._finished:
            return
        if self.alive:
            self.stop()
        self.wait(10)
        self.limit_hit()  # read the cgroup's counters before the group is removed
        self._finished = True
        WATCHDOG.forget(self)
        self.output.join()
        self._release()

    def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        if self._unsafe_dir is not None:
            shutil.rmtree(self._unsafe_dir, ignore_errors=True)


class ForkedProcess:
    """A ``Popen``-like handle on a process this one did not start (a worker forked by a zygote): its exit is
    seen through a pidfd (Linux's ``pidfd_open(2)``), its exit code read from a pipe its parent writes once it
    has reaped it (-9 when nothing comes: the parent died with it).

    Raises:
        OSError: ``pid`` is gone already.
    """

    def __init__(self, pid: int, status_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid)
        self._status = status_fd
        self._lock = threading.Lock()
        """The watchdog and a worker's exit thread look at once; only one may close the descriptors."""

    def poll(self) -> int | None:
        """The exit code once the process has exited, else None."""
        with self._lock:
            if self.returncode is None and _readable(self._pidfd, 0.0):
                self._finish()
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds for the exit.

        Raises:
            subprocess.TimeoutExpired: still running.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.005)  # not a blocking poll: another thread may close the pidfd meanwhile
        return code

    def _finish(self) -> None:
        text = b""
        if _readable(self._status, 1.0):
            with contextlib.suppress(OSError):
                text = os.read(self._status, 32)
        try:
            self.returncode = int(text)
        except ValueError:
            self.returncode = -signal.SIGKILL
        for fd in (self._pidfd, self._status):
            with contextlib.suppress(OSError):
                os.close(fd)


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` is readable (a pidfd: its process has exited) within ``timeout_s`` seconds. ``poll(2)``,
    not ``select(2)``: select refuses descriptors from 1024 on (FD_SETSIZE), which a busy service reaches."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def kill_tree(root: int, rounds: int = 5) -> None:
    """SIGKILL ``root`` and every process below it (orphans a subreaper keeps included), stopping them first
    until no new one appears, so that none forks past the kill."""
    stopped: set[int] = set()
    for _ in range(rounds):
        fresh = [pid for pid in tree_pids(root) if pid not in stopped]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped.update(fresh)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@dataclass
class Completed:
    """What a one-shot sandboxed command did."""

    returncode: int | None
    """Exit status; None when it was killed for the time limit."""
    output: str
    """stdout and stderr, interleaved (the first and last 64 KiB when longer)."""
    timed_out: bool
    wall_ms: float
    sandbox: str
    """``bwrap`` or ``unsafe-none``."""
    limit: LimitHit | None = None
    """The resource limit that ended it, if one did."""

    @property
    def killed_by_signal(self) -> bool:
        """Whether the command died from a signal (bubblewrap reports signal N as 128 + N)."""
        code = self.returncode
        return code is not None and (code < 0 or 128 < code <= 128 + signal.SIGRTMAX)


def run(argv: Sequence[str], *, mounts: Mounts, limits: Limits, timeout_s: float,
        env: Mapping[str, str] | None = None, cwd: Path | None = None,
        on_start: Callable[[subprocess.Popen[Any]], None] | None = None) -> Completed:  # fmt: skip
    """Run ``argv`` in a sandbox until it exits or ``timeout_s`` seconds pass (then it is killed whole).

    ``cwd`` is the working directory as the sandbox sees it; ``on_start`` gets the launcher's ``Popen`` (a
    cancel may kill its process group).

    Raises:
        fibserve.sandbox.SandboxUnavailable: no usable bubblewrap and no ``--unsafe-no-sandbox``.
        OSError: the command could not be started.
    """
    sandbox = Sandbox(argv, mounts=mounts, limits=limits, env=env, cwd=cwd)
    try:
        if on_start is not None:
            on_start(sandbox.proc)
        returncode = sandbox.wait(timeout_s)
        timed_out = returncode is None
    finally:
        sandbox.close()
    return Completed(
        returncode=None if timed_out else returncode,
        output=sandbox.output.text(),
        timed_out=timed_out,
        wall_ms=(time.monotonic() - sandbox.started) * 1000.0,
        sandbox=sandbox.mode,
        limit=sandbox.limit_hit(),
    )
