"""Starting, talking to and discarding sandbox workers (trusted side).

A :class:`WorkerProcess` is one worker forked from the process's warm zygote (:mod:`fibserve.bench.worker.forking`)
into a sandbox of its own, inside the zygote's :class:`fibserve.sandbox.Sandbox`:
its own PID, IPC, network, mount and user namespaces, only the system's and Python's files read-only, a
private size-limited ``/tmp`` as its only writable directory, the GPU's device nodes (and the host's
``/dev/shm``, which CUDA IPC needs) on a GPU, the limits of :class:`fibserve.sandbox.Limits`, and an
environment from an allowlist. It talks JSON over two inherited pipes (:mod:`fibserve.bench.worker.entry`);
replies are parsed as JSON only (never unpickled: the worker is untrusted). Its stdout and stderr are read
through a pipe and only their start and end are kept. A third inherited descriptor, a Unix socket, carries
what the trusted side hands over as descriptors of memfds it made (:mod:`fibserve.bench.worker.handover`): sealed
copies of the candidate's build products (so it sees no build cache) and, on CPU, the shared buffers. The
trusted side never opens a path inside the worker's file system: the candidate can make any of them a
symbolic link or a file it truncates later.

A :class:`WorkerPool` keeps warm spares started ahead of time, so loading a candidate does not wait for the
fork and the CUDA context to start. A worker serves one candidate (or, as the reference's timing
twin, one evaluation's reference) and is then discarded, killing everything it started.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import threading
import time
import weakref
from collections.abc import Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from fibserve.bench.worker import shm_cleanup
from fibserve.bench.worker.forking import ZygoteError, zygote_for
from fibserve.bench.worker.handover import HandoverError, sealed_copy, send_fds
from fibserve.sandbox import (
    UNSAFE_NOTE,
    WORKER_LIMITS,
    LimitHit,
    Limits,
    SandboxUnavailable,
    limit_of_errno,
)
from fibserve.sandbox import status as sandbox_status
from fibserve.sandbox.watchdog import tree_pids

GRACE_S = 3.0
"""Seconds a worker gets to exit on its own after ``{"op": "exit"}`` before it is killed."""

MAX_REPLY_BYTES = 16 << 20
"""Longest reply line accepted from a worker; longer is a protocol violation."""


class WorkerError(RuntimeError):
    """A worker failed. ``kind`` is ``timeout``, ``died`` or ``protocol``; ``log`` is its output tail;
    ``limit`` the resource limit that ended it, if one did."""

    def __init__(self, kind: str, message: str, log: str = "", limit: LimitHit | None = None):
        super().__init__(message)
        self.kind = kind
        self.log = log
        self.limit = limit


_LIVE: weakref.WeakSet[WorkerProcess] = weakref.WeakSet()
"""The workers of this process that have not been killed yet."""


def live_worker_pids() -> list[int]:
    """Host pids of every live worker's sandbox tree in this process (spares, twins and candidates alike)."""
    return [pid for worker in list(_LIVE) if worker.alive for pid in tree_pids(worker.proc.pid)]


def _held_by_live_workers() -> set[shm_cleanup.FileId]:
    return set(shm_cleanup.held_files(live_worker_pids()))


_EXITING: set[threading.Thread] = set()
"""Graceful worker exits still running in the background (joined at pool close and interpreter exit)."""


def _join_exits(timeout: float = GRACE_S + 12.0) -> None:
    """Wait for background worker exits (and their /dev/shm cleanup) to finish, at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    for thread in list(_EXITING):
        thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(_join_exits)


class WorkerProcess:
    """One sandbox worker (see the module docstring).

    Raises:
        fibserve.sandbox.SandboxUnavailable: candidates cannot be confined here.
    """

    def __init__(self, device: str, *, interpret_triton: bool = False, limits: Limits = WORKER_LIMITS):
        self.device = device
        self.ready: dict[str, Any] | None = None
        self.started = time.monotonic()
        self._buffer = b""
        self._unanswered = False
        """Whether a request went unanswered in its time: its late reply would be read as the next one's."""
        self._shm_before = shm_cleanup.snapshot() if device.startswith("cuda") else None
        """The host's ``/dev/shm`` at the start, for a GPU worker (which shares it; a CPU worker's is private)."""
        self._killed = False
        """Whether the hard kill ran: its descriptors are closed, and closing their numbers again would close
        whatever file of this process the kernel has given them to since."""
        self._kill_lock = threading.Lock()
        """One hard kill at a time (a graceful exit's thread and a caller's kill can meet); guards ``_readers``."""
        self._readers = 0
        """Reads of the reply pipe in progress: a kill that meets one leaves the pipe's closing to its end, so
        that no read ever selects or reads a number the kernel has given to another file."""
        try:
            forked = zygote_for(device, interpret_triton=interpret_triton, limits=limits).fork(limits)
        except ZygoteError as exc:
            raise WorkerError("died", str(exc)) from None
        self.sandbox = forked.sandbox
        self._channel = forked.channel
        self._req = os.fdopen(forked.requests, "w", encoding="utf-8")
        self._rep = forked.replies
        os.set_blocking(self._rep, False)
        _LIVE.add(self)

    @property
    def proc(self) -> Any:
        """The ``Popen`` of the sandbox's first process."""
        return self.sandbox.proc

    @property
    def alive(self) -> bool:
        """Whether the child is still running."""
        return self.sandbox.alive

    def log_tail(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes the worker (and the candidate) printed."""
        return self.sandbox.output.tail(limit)

    def limit_hit(self, errno: int | None = None) -> LimitHit | None:
        """The resource limit that ended the worker, or that an error reply's ``errno`` names."""
        hit = self.sandbox.limit_hit()
        if hit is None and errno is not None:
            hit = limit_of_errno(errno, self.sandbox.limits)
        return hit

    def _error(self, kind: str, message: str) -> WorkerError:
        if kind != "protocol" and not self.alive:
            self.sandbox.wait(2)
        return WorkerError(kind, message, self.log_tail(), self.limit_hit())

    def _refuse_if_killed(self) -> None:
        if self._killed:
            raise self._error("died", "the worker was killed")

    def _read_line(self, timeout: float) -> dict[str, Any]:
        self._refuse_if_killed()  # at once, not after a kill in progress (it holds the lock) has finished
        with self._kill_lock:
            counted = not self._killed
            if counted:
                self._readers += 1
        if not counted:  # killed meanwhile: its reply pipe is closed, the number may be another file's now
            self._refuse_if_killed()
        try:
            return self._read_line_open(timeout)
        finally:
            with self._kill_lock:
                self._readers -= 1
                if self._killed and self._readers == 0:
                    with contextlib.suppress(OSError):  # never in place of the read's own error
                        os.close(self._rep)  # the kill met this read and left the pipe to it

    def _read_line_open(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        selector.register(self._rep, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._error("timeout", f"worker gave no answer within {timeout:.1f} s")
                if not selector.select(min(remaining, 0.5)):
                    if not self.alive and b"\n" not in self._buffer:
                        break
                    continue
                try:
                    chunk = os.read(self._rep, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                self._buffer += chunk
                if len(self._buffer) > MAX_REPLY_BYTES:
                    raise self._error("protocol", "worker reply exceeds the size limit")
        finally:
            selector.close()
        if b"\n" not in self._buffer:
            code = self.sandbox.wait(2)
            raise self._error("died", f"worker exited (code {code})")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            raise self._error("protocol", "worker sent a line that is not JSON") from None
        if not isinstance(message, dict):
            raise self._error("protocol", "worker sent JSON that is not an object")
        return message

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """Wait for the worker's start-up message (torch and CUDA initialised)."""
        if self.ready is None:
            self.ready = self._read_line(timeout)
            if not self.ready.get("ready"):
                raise self._error("protocol", f"unexpected first message {self.ready!r}")
        return self.ready

    def request(self, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait up to ``timeout`` seconds for its reply.

        Raises:
            WorkerError: timeout, worker death or a malformed reply; ``protocol`` at once when an earlier request
                went unanswered in its time (the worker is out of step: its late reply would answer this one;
                :meth:`resync`).
        """
        self._refuse_if_killed()
        if self._unanswered:
            raise self._error("protocol", "worker is out of step: an earlier request timed out")
        try:
            self._req.write(json.dumps(message) + "\n")
            self._req.flush()
        except (OSError, ValueError):  # ValueError: a kill closed the pipe meanwhile
            raise self._error("died", "worker is gone (broken pipe)") from None
        try:
            return self._read_line(timeout)
        except WorkerError as exc:
            self._unanswered = exc.kind == "timeout"
            raise

    @property
    def in_step(self) -> bool:
        """Whether every request sent has had its reply read (False after a request timed out)."""
        return not self._unanswered

    def resync(self, timeout: float) -> bool:
        """Read and drop the late reply of the request that timed out, waiting up to ``timeout`` seconds for
        it; whether the worker is in step again (True at once when it was)."""
        if self._unanswered:
            try:
                self._read_line(timeout)
            except WorkerError:
                return False
            self._unanswered = False
        return True

    def hand_over(self, fds: list[int]) -> None:
        """Send ``fds`` (descriptors this process made, see :mod:`fibserve.bench.worker.handover`) to the worker, which
        reads them when the next request announces them; they stay open here (the caller closes them).

        Raises:
            WorkerError: the worker is gone (``died``).
        """
        self._refuse_if_killed()
        try:
            send_fds(self._channel, fds)
        except HandoverError as exc:
            raise self._error("died", str(exc)) from None

    def load(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Hand the build products named by a ``load`` request to the worker as sealed copies (the library,
        or every file of the package), then send the request with their names instead of paths here.

        Raises:
            WorkerError: as :meth:`request`, or the products could not be handed over (``died``).
            OSError: a build product could not be read here (the build cache is broken: infrastructure).
        """
        staged = {k: v for k, v in request.items() if k not in ("library", "package_root")}
        if request.get("library"):
            files = {"solution.so": Path(request["library"])}
        else:
            files = _package_files(Path(request["package_root"]) / request["package"])
        fds = [sealed_copy(path.read_bytes(), name) for name, path in files.items()]
        try:
            self.hand_over(fds)
        finally:
            for fd in fds:
                os.close(fd)
        staged["files"] = list(files)
        return self.request({"op": "load", **staged}, timeout)

    def kill(self, graceful: bool = False) -> None:
        """End the worker and everything it started, and remove what it left in ``/dev/shm``.

        ``graceful``: first ask it to exit (so torch removes its CUDA IPC files) and give it ``GRACE_S``
        seconds, in a background thread, off the caller's critical path (joined by :meth:`WorkerPool.close`
        and at interpreter exit).
        """
        if graceful and self.alive:
            thread = threading.Thread(
                target=self._exit_then_kill, name=f"worker-exit-{self.proc.pid}", daemon=True
            )
            thread.start()
            _EXITING.add(thread)  # after start: a thread that never started could not be joined
            return
        self._hard_kill(self._held_shm())

    def _exit_then_kill(self) -> None:
        try:
            files = self._held_shm()
            with contextlib.suppress(OSError, ValueError):
                self._req.write(json.dumps({"op": "exit"}) + "\n")
                self._req.flush()
            self.sandbox.wait(GRACE_S)
            self._hard_kill(files)
        finally:
            _EXITING.discard(threading.current_thread())

    def _held_shm(self) -> dict[shm_cleanup.FileId, str]:
        if self._shm_before is None:
            return {}
        return shm_cleanup.held_files(tree_pids(self.proc.pid))

    def _hard_kill(self, shm: dict[shm_cleanup.FileId, str]) -> None:
        """Kill the tree and close this side's descriptors, once: a later call (a second kill, or an exit
        thread after a caller's kill) waits for the first to finish and does nothing. A read of the reply pipe
        still in progress (on another thread) closes that pipe when it ends, not this."""
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
            _LIVE.discard(self)
            self.sandbox.close()
            self._channel.close()
            with contextlib.suppress(OSError, ValueError):
                self._req.close()
            if self._readers == 0:  # else the last read in progress closes it when it ends
                with contextlib.suppress(OSError):
                    os.close(self._rep)
            if shm and self._shm_before is not None:
                shm_cleanup.remove_left_behind(shm, self._shm_before, _held_by_live_workers())


def _package_files(package_dir: Path) -> dict[str, Path]:
    """Every regular file of a built Python/Triton package (written by the trusted builder), keyed by its path
    relative to ``package_dir``; links are not followed."""
    files = {}
    for directory, _subdirs, names in os.walk(package_dir):
        for name in sorted(names):
            path = Path(directory) / name
            if path.is_file() and not path.is_symlink():
                files[path.relative_to(package_dir).as_posix()] = path
    return files


class WorkerPool:
    """Hands out fresh workers for one device, keeping warm spares started ahead of time.

    Args:
        device: ``cpu`` or ``cuda:N``.
        interpret_triton: start workers with ``TRITON_INTERPRET=1`` (CPU mode).
        spares: how many started workers to keep waiting (0: start each one when asked). A GPU evaluation
            takes two (the candidate's and the reference's timing twin), a CPU evaluation one.
        limits: every worker's resource limits.

    Where candidates cannot be confined (:func:`fibserve.sandbox.status`), no worker is started and
    :meth:`acquire` raises :class:`fibserve.sandbox.SandboxUnavailable`.
    """

    def __init__(
        self, device: str, *, interpret_triton: bool = False, spares: int = 1, limits: Limits = WORKER_LIMITS
    ):
        self.device = device
        self.status = sandbox_status()
        self.notes: list[str] = [UNSAFE_NOTE] if self.status.mode == "unsafe-none" else []
        self.interpret_triton = interpret_triton
        self.limits = limits
        self.spares = max(0, spares) if self.status.usable else 0
        self._spares: list[Future[WorkerProcess]] = []
        self._spares_lock = threading.Lock()
        """``acquire`` (a lane's thread) and ``close`` (a stopping service's) both take spares: each spare goes to
        one of them."""
        self._closed = False
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"spares-{device}")
        """Spares are forked here, off the caller's path (the first one also has the zygote started, on the zygote
        thread of :mod:`fibserve.bench.worker.forking`, which outlives this one)."""
        self.started_count = 0
        self._replenish()

    @property
    def mode(self) -> str:
        """``bwrap``, ``unsafe-none`` or ``unavailable`` (see :mod:`fibserve.sandbox.switch`)."""
        return self.status.mode

    def _start(self) -> WorkerProcess:
        if not self.status.usable:
            raise SandboxUnavailable(self.status.detail)
        self.started_count += 1
        return WorkerProcess(self.device, interpret_triton=self.interpret_triton, limits=self.limits)

    def _replenish(self) -> list[WorkerProcess]:
        """Drop dead spares and start new ones up to ``spares`` (the caller holds ``_spares_lock``); returns the
        dead ones' workers, for the caller to kill once it has let go of the lock (a kill can take seconds)."""
        dead = [s for s in self._spares if s.done() and (s.exception() or not s.result().alive)]
        for spare in dead:
            self._spares.remove(spare)
        while len(self._spares) < self.spares:
            self._spares.append(self._starter.submit(self._start))
        return [spare.result() for spare in dead if spare.exception() is None]

    def acquire(self, timeout: float) -> WorkerProcess:
        """A ready worker (the oldest spare when there is one), starting its replacement at once.

        Raises:
            WorkerError: the worker did not start within ``timeout`` seconds (an infrastructure problem), or the
                pool was closed.
            fibserve.sandbox.SandboxUnavailable: candidates cannot be confined here.
        """
        with self._spares_lock:
            if self._closed:
                raise WorkerError("died", _CLOSED)
            dead = self._replenish()
            spare = self._spares.pop(0) if self._spares else None
            dead += self._replenish()
        for worker in dead:
            worker.kill()
        deadline = time.monotonic() + timeout
        if spare is None:
            worker = self._start()
        else:
            try:
                worker = spare.result(timeout)
            except FutureTimeout:
                spare.add_done_callback(_kill_started)
                raise WorkerError("timeout", f"no worker was forked within {timeout:.0f} s") from None
            except CancelledError:  # still queued when the pool was closed
                raise WorkerError("died", _CLOSED) from None
        try:
            worker.wait_ready(max(0.0, deadline - time.monotonic()))
        except WorkerError:
            worker.kill()
            raise
        return worker

    def wait_spares(self, timeout: float) -> None:
        """Wait until every spare has finished starting (benchmarks call this so that no worker start-up
        overlaps what they measure).

        Raises:
            WorkerError: a spare did not start within ``timeout`` seconds, or the pool was closed meanwhile.
        """
        with self._spares_lock:
            waiting = list(self._spares)
        for spare in waiting:
            try:
                spare.result(timeout).wait_ready(timeout)
            except FutureTimeout:
                raise WorkerError("timeout", f"no worker was forked within {timeout:.0f} s") from None
            except CancelledError:
                raise WorkerError("died", _CLOSED) from None

    def close(self) -> None:
        """Kill the spares and wait for workers still exiting; a later :meth:`acquire` raises ``WorkerError``."""
        with self._spares_lock:
            spares, self._spares, self._closed = self._spares, [], True
        for spare in spares:
            spare.add_done_callback(_kill_started)
        self._starter.shutdown(wait=True, cancel_futures=True)
        _join_exits()


_CLOSED = "the worker pool is closed (its evaluator was closed)"


def _kill_started(spare: Future[WorkerProcess]) -> None:
    """Kill a spare no one will take, once it has started (if it did)."""
    if not spare.cancelled() and spare.exception() is None:
        spare.result().kill()
