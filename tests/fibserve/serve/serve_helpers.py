"""Helpers for the FIBServe tests: a real server subprocess and small candidate solutions."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """One `fibserve serve` subprocess; restartable on the same state directory."""

    def __init__(self, state_dir: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.args = args
        self.env = {**os.environ, **(env or {})}
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = state_dir.parent / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 90.0) -> ServerProcess:
        """Start and wait until /health answers; raise with the server log if it does not."""
        cmd = [
            sys.executable,
            "-m",
            "fibserve",
            "serve",
            "--port",
            str(self.port),
            "--state-dir",
            str(self.state_dir),
        ]
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(cmd + self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"server did not answer /health within {timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:] if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait for the graceful shutdown; returns the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)


TRITON_ADD = """import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, x + y, mask=mask)


def run(x, y, z):
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
"""


def triton_add_solution(name: str = "triton add", body: str = TRITON_ADD) -> dict:
    """A float32 Triton solution of the bundled ``vector_add_f32`` definition (destination passing)."""
    return {
        "name": name,
        "definition": "vector_add_f32",
        "author": "tests",
        "spec": {"language": "triton", "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
        "sources": [{"path": "kernel.py", "content": body}],
    }


VECTOR_ADD_SMALL = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"
"""The N=1024 workload of ``vector_add_f32`` in the bundled trace set."""
