"""Starting, talking to and discarding sandbox workers (trusted side).

A :class:`WorkerProcess` is one ``python -m fibserve.bench.worker`` child, inside bubblewrap when ``bwrap`` is
installed (read-only root, ``/dev`` bound for the GPU, private ``/tmp``, no network, only its own work
directory writable, killed with its parent). It gets a minimal environment (no secrets), its own process
group (so a timeout kills everything it started) and two pipes for the JSON protocol of
:mod:`fibserve.bench.worker`. Replies are parsed as JSON only (never unpickled: the worker is untrusted).

A :class:`WorkerPool` keeps warm spares started ahead of time, so loading a candidate does not wait for
Python, torch and the CUDA context to start. A worker serves one candidate (or, as the reference's timing
twin, one evaluation's reference) and is then discarded.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

GRACE_S = 3.0
"""Seconds a worker gets to exit on its own after ``{"op": "exit"}`` before it is killed."""

MAX_REPLY_BYTES = 16 << 20
"""Longest reply line accepted from a worker; longer is a protocol violation."""

_PASS_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
)


class WorkerError(RuntimeError):
    """A worker failed. ``kind`` is ``timeout``, ``died`` or ``protocol``; ``log`` is its output tail."""

    def __init__(self, kind: str, message: str, log: str = ""):
        super().__init__(message)
        self.kind = kind
        self.log = log


def bwrap_path() -> str | None:
    """The bubblewrap executable, or None when it is not installed."""
    return shutil.which("bwrap")


def _python_paths() -> list[str]:
    """Directories the worker needs on sys.path (this package and the interpreter's site-packages)."""
    import fibserve

    root = str(Path(fibserve.__file__).resolve().parent.parent)
    return [root, *[p for p in sys.path if p and p != root]]


def _rebind_hidden_tmp() -> list[str]:
    """Read-only binds for the Python path entries and the build cache that the private /tmp would hide."""
    from fibserve.build.cache import default_cache_dir
    from fibserve.build.sandbox import under_hidden_roots

    cache = default_cache_dir()
    # A warm spare may start before the first build creates the cache: create it now so the bind exists.
    cache.mkdir(parents=True, exist_ok=True)
    argv: list[str] = []
    for path in under_hidden_roots([*_python_paths(), cache], [Path("/tmp")]):
        argv += ["--ro-bind", str(path), str(path)]
    return argv


def gpu_bwrap_prefix(workdir: Path) -> list[str]:
    """bubblewrap arguments for a process that runs candidate code on the GPU (the worker, the tool runner).

    Read-only root, ``/dev`` bound for the GPU, a private ``/tmp`` (with the Python path and build cache that
    it would hide bound back read-only), no network, and only ``workdir`` writable. The caller appends its
    own options, then ``--`` and the command.
    """
    return [
        bwrap_path() or "bwrap",
        "--ro-bind", "/", "/",
        "--dev-bind", "/dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        *_rebind_hidden_tmp(),
        "--bind", str(workdir), str(workdir),
        "--unshare-net",
        "--die-with-parent",
    ]  # fmt: skip


def _shm_files_of(pid: int, since: float) -> list[str]:
    """Files in /dev/shm that the dead process ``pid`` left behind: torch's CUDA IPC reference counters
    (``torch_<pid>_<random>_<n>``) and the CUDA driver's interprocess-event segments
    (``cuda.shm.<a>.<pid in hex>.<n>``, seen on the H200 with driver 580: one per worker that shared memory).
    Only files of this user modified at or after ``since`` (epoch seconds, the worker's start) are named, so
    an older process that had the same pid, or another user's, keeps its files."""
    found = []
    for path in [*glob.glob(f"/dev/shm/torch_{pid}_*"), *glob.glob(f"/dev/shm/cuda.shm.*.{pid:x}.*")]:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            if info.st_uid == os.getuid() and info.st_mtime >= since:
                found.append(path)
    return found


_EXITING: set[threading.Thread] = set()
"""Graceful worker exits still running in the background (joined at pool close and interpreter exit)."""


def _join_exits(timeout: float = GRACE_S + 12.0) -> None:
    """Wait for background worker exits (and their /dev/shm cleanup) to finish, at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    for thread in list(_EXITING):
        thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(_join_exits)


class WorkerProcess:
    """One sandbox worker child process (see the module docstring)."""

    def __init__(self, device: str, *, use_bwrap: bool, root_dir: Path, interpret_triton: bool = False):
        self.device = device
        self.workdir = Path(tempfile.mkdtemp(prefix="worker-", dir=root_dir))
        self.log_path = self.workdir / "worker.log"
        self.use_bwrap = use_bwrap
        self.ready: dict[str, Any] | None = None
        self.started = time.monotonic()
        self.started_epoch = time.time() - 1.0  # file times have coarse resolution on some file systems
        self._buffer = b""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env.update(
            HOME=str(self.workdir),
            TMPDIR=str(self.workdir / "tmp"),
            TRITON_CACHE_DIR=str(self.workdir / "triton"),
            CUDA_CACHE_PATH=str(self.workdir / "nv"),
            PYTHONPATH=os.pathsep.join(_python_paths()),
            PYTHONDONTWRITEBYTECODE="1",
        )
        if interpret_triton:
            env["TRITON_INTERPRET"] = "1"
        (self.workdir / "tmp").mkdir()
        argv = [
            sys.executable,
            "-m",
            "fibserve.bench.worker",
            "--in",
            str(req_r),
            "--out",
            str(rep_w),
            "--device",
            device,
        ]
        if use_bwrap:
            argv = [*gpu_bwrap_prefix(self.workdir), "--new-session", "--", *argv]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(req_r, rep_w),
                start_new_session=True,
                cwd=str(self.workdir),
            )
        os.close(req_r)
        os.close(rep_w)
        self._req = os.fdopen(req_w, "w", encoding="utf-8")
        self._rep = rep_r
        os.set_blocking(rep_r, False)

    @property
    def alive(self) -> bool:
        """Whether the child is still running."""
        return self.proc.poll() is None

    def log_tail(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes the worker (and the candidate) printed, decoded as UTF-8; only those bytes
        are read, however much the candidate printed."""
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - limit))
                data = log.read(limit)
        except OSError:
            return ""
        return data.decode("utf-8", "replace")

    def _read_line(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        selector.register(self._rep, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WorkerError(
                        "timeout", f"worker gave no answer within {timeout:.1f} s", self.log_tail()
                    )
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
                    raise WorkerError("protocol", "worker reply exceeds the size limit", self.log_tail())
        finally:
            selector.close()
        if b"\n" not in self._buffer:
            code = self.proc.poll()
            if code is None:
                try:
                    code = self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    code = None
            raise WorkerError("died", f"worker exited (code {code})", self.log_tail())
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            raise WorkerError("protocol", "worker sent a line that is not JSON", self.log_tail()) from None
        if not isinstance(message, dict):
            raise WorkerError("protocol", "worker sent JSON that is not an object", self.log_tail())
        return message

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """Wait for the worker's start-up message (torch and CUDA initialised)."""
        if self.ready is None:
            self.ready = self._read_line(timeout)
            if not self.ready.get("ready"):
                raise WorkerError("protocol", f"unexpected first message {self.ready!r}", self.log_tail())
        return self.ready

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait up to ``timeout`` seconds for its reply.

        Raises:
            WorkerError: timeout, worker death or a malformed reply.
        """
        try:
            self._req.write(json.dumps(message) + "\n")
            self._req.flush()
        except (BrokenPipeError, OSError):
            raise WorkerError("died", "worker is gone (broken pipe)", self.log_tail()) from None
        return self._read_line(timeout)

    def kill(self, graceful: bool = False) -> None:
        """End the worker and everything it started (its whole process group), and remove its work dir.

        ``graceful``: first ask it to exit (so torch removes its CUDA IPC files in /dev/shm) and give it
        ``GRACE_S`` seconds, in a background thread, off the caller's critical path (joined by
        :meth:`WorkerPool.close` and at interpreter exit). Either way, the files it left in /dev/shm (see
        :func:`_shm_files_of`) are removed once it is gone.
        """
        if graceful and self.alive:
            thread = threading.Thread(
                target=self._exit_then_kill, name=f"worker-exit-{self.proc.pid}", daemon=True
            )
            thread.start()
            _EXITING.add(thread)  # after start: a thread that never started could not be joined
            return
        self._hard_kill()

    def _exit_then_kill(self) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):
                self._req.write(json.dumps({"op": "exit"}) + "\n")
                self._req.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=GRACE_S)
            self._hard_kill()
        finally:
            _EXITING.discard(threading.current_thread())

    def _hard_kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError, ValueError):
            self._req.close()
        with contextlib.suppress(OSError):
            os.close(self._rep)
        # Under bubblewrap self.proc is bwrap itself; the Python worker is its child and reported its own pid.
        pids = {self.proc.pid, (self.ready or {}).get("pid")} - {None}
        for pid in pids:
            for leftover in _shm_files_of(int(pid), self.started_epoch):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
        shutil.rmtree(self.workdir, ignore_errors=True)


class WorkerPool:
    """Hands out fresh workers for one device, keeping warm spares started ahead of time.

    Args:
        device: ``cpu`` or ``cuda:N``.
        sandbox: ``auto`` (bubblewrap when installed), ``bwrap`` (required) or ``none``.
        root_dir: where worker work directories are created (a fresh temporary directory by default).
        interpret_triton: start workers with ``TRITON_INTERPRET=1`` (CPU mode).
        spares: how many started workers to keep waiting (0: start each one when asked). A GPU evaluation
            takes two (the candidate's and the reference's timing twin), a CPU evaluation one.
    """

    def __init__(
        self,
        device: str,
        *,
        sandbox: str = "auto",
        root_dir: Path | None = None,
        interpret_triton: bool = False,
        spares: int = 1,
    ):
        if sandbox not in ("auto", "bwrap", "none"):
            raise ValueError(f"sandbox must be auto, bwrap or none, got {sandbox!r}")
        if sandbox == "bwrap" and bwrap_path() is None:
            raise RuntimeError(
                "sandbox='bwrap' was requested but bwrap is not installed (apt-get install bubblewrap)"
            )
        self.device = device
        self.use_bwrap = sandbox != "none" and bwrap_path() is not None
        self.notes: list[str] = []
        if sandbox == "auto" and not self.use_bwrap:
            self.notes.append(
                "bubblewrap not installed: the candidate ran in a plain child process (no filesystem or network isolation)"
            )
        self._own_root = root_dir is None
        self.root_dir = Path(root_dir or tempfile.mkdtemp(prefix="fibserve-sandbox-"))
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.interpret_triton = interpret_triton
        self.spares = max(0, spares)
        self._spares: list[WorkerProcess] = []
        self.started_count = 0
        self._replenish()

    def _start(self) -> WorkerProcess:
        self.started_count += 1
        return WorkerProcess(
            self.device,
            use_bwrap=self.use_bwrap,
            root_dir=self.root_dir,
            interpret_triton=self.interpret_triton,
        )

    def _replenish(self) -> None:
        for dead in [w for w in self._spares if not w.alive]:
            dead.kill()
            self._spares.remove(dead)
        while len(self._spares) < self.spares:
            self._spares.append(self._start())

    def acquire(self, timeout: float) -> WorkerProcess:
        """A ready worker (the oldest spare when there is one), starting its replacement at once.

        Raises:
            WorkerError: the worker did not start within ``timeout`` seconds (an infrastructure problem).
        """
        self._replenish()
        worker = self._spares.pop(0) if self._spares else self._start()
        self._replenish()
        try:
            worker.wait_ready(timeout)
        except WorkerError:
            worker.kill()
            raise
        return worker

    def wait_spares(self, timeout: float) -> None:
        """Wait until every spare has finished starting (benchmarks call this so that no worker start-up
        overlaps what they measure).

        Raises:
            WorkerError: a spare did not start within ``timeout`` seconds.
        """
        for spare in list(self._spares):
            spare.wait_ready(timeout)

    def disable_bwrap(self, reason: str) -> None:
        """Fall back to unsandboxed workers (recording ``reason``), replacing the spares."""
        if not self.use_bwrap:
            return
        self.use_bwrap = False
        self.notes.append(f"bubblewrap disabled: {reason}")
        for spare in self._spares:
            spare.kill()
        self._spares = []
        self._replenish()

    def close(self) -> None:
        """Kill the spares, wait for workers still exiting, and remove the work directories this pool
        created."""
        for spare in self._spares:
            spare.kill()
        self._spares = []
        _join_exits()
        if self._own_root:
            shutil.rmtree(self.root_dir, ignore_errors=True)
