"""The trusted side's handle on a zygote: start it once per device, fork workers from it (trusted side).

A worker used to be a fresh bubblewrap sandbox running a fresh Python that imported torch (about 2 CPU-s, most
of a CPU evaluation and of the test suite). Now one :class:`Zygote` per (device, Triton interpreter) and process
runs :mod:`fibserve.bench.worker.zygote` in a sandbox built exactly as a worker's was, with torch imported, and
:meth:`Zygote.fork` makes a worker in milliseconds: the zygote forks, the child nests a sandbox of its own
(:mod:`fibserve.sandbox.nest`), and this side

- learns the worker's host pid from the kernel (``SCM_CREDENTIALS`` on the descriptor channel, the one thing
  the worker sends before it has run anything but our code),
- moves it into a cgroup of its own with the worker's memory and process limits (its rlimits it set itself),
- and watches, limits and kills it like any sandbox (:meth:`fibserve.sandbox.Sandbox.adopt`, through a pidfd).

Why a zygote with nested namespaces rather than a fresh sandbox per worker around a pre-imported interpreter:
no mechanism hands a running interpreter to a new bubblewrap; the nested namespaces give each worker what its
own bubblewrap gave it (its own PID, mount, IPC and user namespaces, a private ``/tmp``, no capabilities, death
with the service), while the zygote, which no candidate can reach, keeps the imports warm
(docs/security.md, "Workers forked from a zygote").
"""

from __future__ import annotations

import json
import os
import queue
import socket
import struct
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from fibserve.bench.worker.kernel_span import requested as spans_requested
from fibserve.sandbox import ForkedProcess, Limits, Mounts, Sandbox, status
from fibserve.sandbox import cgroup as cgroups

CREDENTIALS = struct.Struct("iII")
"""``struct ucred``: pid, uid, gid."""


def own_pid_namespace(device: str) -> bool:
    """Whether a worker for ``device`` gets a PID namespace of its own: not on a GPU, where the CUDA driver
    needs its PID to match the zygote's ``/proc`` (:mod:`fibserve.sandbox.nest`)."""
    return not device.startswith("cuda")


def fork_request(device: str, limits: Limits) -> dict[str, Any]:
    """The zygote's fork request for a worker on ``device`` with ``limits`` (the JSON part; the descriptors go
    beside it): whether to isolate it and in which PID namespace, its limits, and ``warm_spans``, whether it
    loads CUPTI as it starts (a GPU worker, unless ``FIBSERVE_KERNEL_SPAN=0``,
    :func:`fibserve.bench.worker.kernel_span.requested`)."""
    return {
        "device": device,
        "isolate": status().mode == "bwrap",
        "pid_namespace": own_pid_namespace(device),
        "tmp_bytes": limits.disk_bytes,
        "cpu_s": limits.cpu_s,
        "file_bytes": limits.file_bytes,
        "warm_spans": device.startswith("cuda") and spans_requested(),
    }


class ZygoteError(RuntimeError):
    """The zygote did not start or could not fork a worker (an infrastructure problem)."""


@dataclass
class Forked:
    """A worker just forked: its sandbox (adopted), and the trusted side's ends of its pipes and channel."""

    sandbox: Sandbox
    requests: int
    """Write end of its request pipe."""
    replies: int
    """Read end of its reply pipe."""
    channel: socket.socket
    """Its descriptor channel (this side's end)."""


class Zygote:
    """One zygote process for ``device`` (see the module docstring). Thread-safe: forks are serialised.

    Raises:
        ZygoteError: it did not start within ``timeout`` seconds.
        fibserve.sandbox.SandboxUnavailable: candidates cannot be confined here.
    """

    def __init__(self, device: str, *, interpret_triton: bool, limits: Limits, timeout: float = 300.0):
        self.device = device
        self._lock = threading.Lock()
        control, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [sys.executable, "-m", "fibserve.bench.worker.zygote", "--control", str(zygote_end.fileno())]
        argv += ["--device", device]
        try:
            self.sandbox = Sandbox(
                argv,
                mounts=Mounts(python=True, gpu=device.startswith("cuda")),
                limits=limits.with_(cpu_s=None),  # alive for the service's lifetime; workers get their own
                env={"TRITON_INTERPRET": "1"} if interpret_triton else None,
                pass_fds=(zygote_end.fileno(),),
            )
        except BaseException:
            control.close()
            raise
        finally:
            zygote_end.close()
        self._control = control
        self._buffer = b""
        try:
            ready = self._read(timeout)
            if not isinstance(ready, dict) or not ready.get("ready"):
                raise ZygoteError(f"the worker zygote sent {ready!r} instead of ready")
        except BaseException:
            self.close()  # one that did not answer, or not in time, is not left running
            raise

    @property
    def alive(self) -> bool:
        """Whether the zygote still runs."""
        return self.sandbox.alive

    def _read(self, timeout: float) -> dict:
        self._control.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                chunk = self._control.recv(1 << 16)
                if not chunk:
                    raise ZygoteError(f"the worker zygote exited: {self.sandbox.output.tail(2000)}")
                self._buffer += chunk
        except TimeoutError:
            raise ZygoteError(f"the worker zygote did not answer within {timeout:.0f} s") from None
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def fork(self, limits: Limits, timeout: float = 60.0) -> Forked:
        """A new worker with ``limits``, its sandbox adopted and in a cgroup of its own.

        Raises:
            ZygoteError: the zygote or the new worker did not answer, or the worker could not be moved into its
                cgroup (it is killed).
        """
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        status_r, status_w = os.pipe()
        channel, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        channel.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        ends = [req_r, rep_w, worker_end.fileno(), out_w, status_w]
        request = fork_request(self.device, limits)
        try:
            with self._lock:
                socket.send_fds(self._control, [json.dumps(request).encode()], ends)
                self._read(timeout)
        except (OSError, ZygoteError) as exc:
            for fd in (req_w, rep_r, out_r, status_r):
                os.close(fd)
            channel.close()
            raise ZygoteError(f"could not fork a worker: {exc}") from None
        finally:
            for fd in (req_r, rep_w, out_w, status_w):
                os.close(fd)
            worker_end.close()
        try:
            pid = _sender_pid(channel, timeout)
            process = ForkedProcess(pid, status_r)
        except (OSError, ZygoteError) as exc:
            for fd in (req_w, rep_r, out_r, status_r):
                os.close(fd)
            channel.close()
            raise ZygoteError(f"the forked worker did not start: {exc}") from None
        group = cgroups.create(limits)
        sandbox = Sandbox.adopt(process, limits=limits, cgroup=group, output_fd=out_r)
        if group is not None:
            try:
                group.adopt(pid)
            except OSError as exc:
                sandbox.close()
                os.close(req_w)
                os.close(rep_r)
                channel.close()
                raise ZygoteError(f"could not move the worker into its cgroup: {exc}") from None
        return Forked(sandbox, req_w, rep_r, channel)

    def close(self) -> None:
        """Kill the zygote, and with its sandbox every worker forked from it."""
        self._control.close()
        self.sandbox.close()


def _sender_pid(channel: socket.socket, timeout: float) -> int:
    """The host pid of the process that sent the first byte on ``channel`` (``SO_PASSCRED`` is set on it)."""
    channel.settimeout(timeout)
    try:
        data, ancillary, _flags, _address = channel.recvmsg(1, socket.CMSG_SPACE(CREDENTIALS.size))
    except TimeoutError:
        raise ZygoteError(f"no word from the forked worker within {timeout:.0f} s") from None
    finally:
        channel.settimeout(None)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and data:
            return CREDENTIALS.unpack(payload[: CREDENTIALS.size])[0]
    raise ZygoteError("the forked worker's first message carried no credentials (it exited?)")


class _ZygoteThread:
    """The one thread every zygote is started from: a daemon thread, so it lives until the process exits.

    Bubblewrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the *thread* that forked it ends: a
    zygote that a pool's spare thread started died when that pool closed, with every worker forked from it, and a
    fork racing that death failed (a fresh clone's run lost a test to it on 2026-12-05). Not an executor's thread:
    those are joined as the interpreter shuts down, before the atexit handlers that let workers exit cleanly.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, *args: Any, **kwargs: Any) -> Future[Zygote]:
        """``Zygote(*args, **kwargs)``, made on the thread."""
        future: Future[Zygote] = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="fibserve-zygotes", daemon=True)
                self._thread.start()
        self._jobs.put((future, args, kwargs))
        return future

    def _serve(self) -> None:
        while True:
            future, args, kwargs = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(Zygote(*args, **kwargs))
                except BaseException as exc:
                    future.set_exception(exc)


_ZYGOTES: dict[tuple[str, bool], Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()
_ZYGOTE_THREAD = _ZygoteThread()


def _forget_after_fork() -> None:
    """In a forked child: the parent's zygotes, lock and thread are not the child's (a closed copy would kill the
    parent's zygote through its cgroup; the thread does not exist here)."""
    global _ZYGOTES, _ZYGOTES_LOCK, _ZYGOTE_THREAD
    _ZYGOTES, _ZYGOTES_LOCK, _ZYGOTE_THREAD = {}, threading.Lock(), _ZygoteThread()


os.register_at_fork(after_in_child=_forget_after_fork)


def _close_when_started(started: Future[Zygote]) -> None:
    """Close the zygote ``started`` makes, once made: its caller stopped waiting for it."""

    def close(done: Future[Zygote]) -> None:
        if done.exception() is None:
            done.result().close()

    started.add_done_callback(close)


def zygote_for(device: str, *, interpret_triton: bool, limits: Limits) -> Zygote:
    """This process's zygote for ``device`` (started on first use, restarted when it died): every pool of the
    process shares it, so each pays for the imports once.

    Raises:
        ZygoteError, fibserve.sandbox.SandboxUnavailable: as :class:`Zygote`.
    """
    key = (device, interpret_triton)
    with _ZYGOTES_LOCK:
        zygote = _ZYGOTES.get(key)
        if zygote is None or not zygote.alive:
            if zygote is not None:
                zygote.close()
            started = _ZYGOTE_THREAD.start(device, interpret_triton=interpret_triton, limits=limits)
            try:
                zygote = _ZYGOTES[key] = started.result()
            except BaseException:
                _close_when_started(started)  # interrupted: one that starts after all is not left running
                raise
        return zygote
