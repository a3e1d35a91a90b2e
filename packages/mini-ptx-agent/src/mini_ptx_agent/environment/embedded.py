"""An embedded FIBServe: start ``fibserve serve`` as a child process on 127.0.0.1 and stop it afterwards.

Used by `ptxbench eval` and `ptxbench run` when no ``--service-url``/``SERVICE_URL`` is given, by the quickstart,
and by tests. The child is a real server (the same command a user runs), so nothing is simulated: it binds a
free loopback port, writes its task database under a state directory, and its output goes to a log file that
the caller keeps (a run directory's evaluator log). Without a GPU the server evaluates on its CPU lane (Triton
float32 under the interpreter, CUDA statically only).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fibserve.sandbox.env import service_env

SERVICE_URL_ENV = "SERVICE_URL"
"""Environment variable naming a running FIBServe (``http://host:port``)."""

STARTUP_TIMEOUT_S = 120.0
"""Longest wait for the embedded server's ``/health`` to answer (s); importing torch dominates it."""


LANES_READY_TIMEOUT_S = 60.0
"""Longest wait for every lane of a FIBServe to report healthy (s). A lane answers ``healthy: false`` (detail
``starting``) until it has built its evaluator (and, on a GPU, its warm spare), so ``/health`` says ``degraded``
for a while after the server first answers; on a cold machine that can take tens of seconds."""


class ServiceStartError(RuntimeError):
    """The embedded FIBServe did not come up; the message quotes the end of its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return ""


def wait_healthy(
    url: str, timeout_s: float, process: subprocess.Popen | None = None, log: Path | None = None
) -> None:
    """Poll ``GET {url}/health`` until it answers 200.

    Raises:
        ServiceStartError: the process exited or ``timeout_s`` passed; quotes the log's end when given.
    """
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            raise ServiceStartError(
                f"fibserve exited with status {process.returncode} before answering /health. "
                f"Its log ends with:\n{_tail(log) if log else ''}"
            )
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise ServiceStartError(
                f"fibserve at {url} did not answer /health within {timeout_s:g} s. "
                f"Its log ends with:\n{_tail(log) if log else ''}"
            )
        time.sleep(0.2)


def wait_lanes_ready(
    url: str, timeout_s: float = LANES_READY_TIMEOUT_S, *, token: str | None = None, poll_s: float = 0.5
) -> dict[str, Any] | None:
    """Poll ``GET {url}/health`` until its ``status`` is ``ok`` (every lane healthy) or ``timeout_s`` passes.

    FIBServe's ``/health`` is ``degraded`` while any lane is unhealthy: still starting its evaluator, retrying a
    failed start, or stopped (``fibserve.serve.scheduler.Lane``); each lane's ``detail`` says which. Only a
    ``degraded`` answer is waited on: an unreachable service or a non-200 answer returns at once (waiting would
    not change it). Never raises: the caller judges the service itself.

    Returns:
        The last ``/health`` answer (JSON object), or None when it did not answer 200.
    """
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] | None = None
    while True:
        try:
            response = httpx.get(f"{url}/health", timeout=5.0, headers=headers)
            if response.status_code != 200:
                return last
            last = response.json()
        except (httpx.HTTPError, ValueError):
            return last
        if not isinstance(last, dict) or last.get("status") == "ok":
            return last if isinstance(last, dict) else None
        if time.monotonic() >= deadline:
            return last
        time.sleep(poll_s)


def unhealthy_lanes(health: dict[str, Any]) -> list[str]:
    """``"<lane>: <why>"`` for each unhealthy lane of a ``/health`` answer (``no lanes`` when it has none)."""
    workers = health.get("workers") or []
    if not workers:
        return ["no lanes: the server runs no worker lane"]
    return [
        f"{w.get('device', '?')}: {w.get('detail') or 'unhealthy (no detail given)'}"
        for w in workers
        if not w.get("healthy")
    ]


class EmbeddedService:
    """A ``fibserve serve`` child process. Use as a context manager; ``url`` is set once it is healthy."""

    def __init__(
        self,
        *,
        roots: Sequence[Path] = (),
        devices: Sequence[str] | None = None,
        log_path: Path | None = None,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        lanes_timeout_s: float = LANES_READY_TIMEOUT_S,
        extra_env: dict[str, str] | None = None,
    ):
        """``roots``: trace-set roots (default: the server's, i.e. DATASET_ROOTS or the bundled set);
        ``devices``: lanes such as ``["cpu"]`` (default: the server's choice, every GPU or cpu);
        ``lanes_timeout_s``: how long :meth:`start` waits for every lane to be healthy (s)."""
        self.roots = [Path(r) for r in roots]
        self.devices = list(devices) if devices else None
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.lanes_timeout_s = lanes_timeout_s
        self.extra_env = dict(extra_env or {})
        self.url: str | None = None
        self.process: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

    def command(self, port: int, state_dir: Path) -> list[str]:
        """The argv of the server process."""
        argv = [sys.executable, "-m", "fibserve", "serve", "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--state-dir", str(state_dir)]
        for root in self.roots:
            argv += ["--local", str(root)]
        if self.devices:
            argv += ["--devices", ",".join(self.devices)]
        return argv

    def start(self) -> str:
        """Start the server, wait until ``/health`` answers, then until its lanes are healthy; returns its URL.

        The lane wait is bounded by ``lanes_timeout_s`` and does not raise: a lane still unhealthy after it is
        reported by ``/health`` (tasks queue until a lane takes them), so callers that judge health read it.

        Raises:
            ServiceStartError: it did not come up (the message quotes its log).
        """
        self._tmp = tempfile.TemporaryDirectory(prefix="ptxbench-fibserve-")
        tmp = Path(self._tmp.name)
        log_path = self.log_path or tmp / "fibserve.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # An allowlist, never a copy: the agent's API keys and tokens must be in no process that serves
        # candidates (fibserve.sandbox.env.service_env keeps FIBServe's own variables only).
        env = service_env()
        env.update(self.extra_env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(port, tmp / "state"),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        try:
            wait_healthy(url, self.startup_timeout_s, self.process, log_path)
            wait_lanes_ready(url, self.lanes_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.url = url
        return url

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s), redact secrets from a kept log, clean up."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        self.url = None
        if self.log_path is not None and self.log_path.is_file():
            # The log is a file the run keeps: no secret from this environment may stay in it.
            from ..trajectory import redact_text, write_text_atomic

            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            if redact_text(text) != text:
                write_text_atomic(self.log_path, text)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> EmbeddedService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def service_url(
    url: str | None = None, *, log_path: Path | None = None, **embedded: object
) -> Iterator[tuple[str, bool]]:
    """The FIBServe to use: ``url``, else ``$SERVICE_URL``, else an embedded server started for the block.

    Yields ``(url, embedded)``. Keyword arguments go to :class:`EmbeddedService`.
    """
    chosen = url or os.environ.get(SERVICE_URL_ENV)
    if chosen:
        yield chosen.rstrip("/"), False
        return
    with EmbeddedService(log_path=log_path, **embedded) as service:  # type: ignore[arg-type]
        assert service.url is not None
        yield service.url, True
