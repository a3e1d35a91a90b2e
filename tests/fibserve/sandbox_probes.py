"""Helpers for the sandbox tests: bait a candidate must not reach, the hostile probes, and a process finder.

Imported as ``from sandbox_probes import ...`` (tests/fibserve is on ``sys.path``, see kernel_fixtures.py);
``benchmarks/sandbox_gpu_probe.py`` uses it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernel_fixtures import cuda_solution

CHECKOUT = Path(__file__).resolve().parents[2]
PROBES = Path(__file__).resolve().parent / "bench" / "kernels"


@dataclass
class Bait:
    """What :func:`planted` put in place: the probe's arguments and what to check afterwards."""

    args: dict
    """The JSON object the hostile probes read (``$args``)."""
    token: str
    """The token a server-like process holds in its command line and environment."""
    marker: str
    """In the command line of the orphan a probe leaves behind."""

    def written(self) -> list[str]:
        """The bait paths the probe managed to write (each removed again)."""
        found = [p for p in self.args["write"] if Path(p).exists() and not p.startswith(str(self.work))]
        for path in found:
            Path(path).unlink()
        return found

    @property
    def work(self) -> Path:
        return Path(self.args["bait_dir"])


@contextlib.contextmanager
def planted(base: Path) -> Iterator[Bait]:
    """A server-like process holding a token (in its command line and as OPENAI_API_KEY), a listener on
    127.0.0.1, a service state file, a build cache file and a file in the host's /dev/shm, for the duration."""
    from fibserve.build.cache import default_cache_dir

    token = f"fibserve-bait-token-{os.getpid()}-{time.monotonic_ns() % 10**8}"
    state = base / "fibserve-state" / "tasks.sqlite3"
    state.parent.mkdir(parents=True)
    state.write_text("task data of other clients")
    shm = Path("/dev/shm") / f"fibserve-bait-{os.getpid()}"
    shm.write_text("host shared memory")
    server = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "serve", "--token", token],
        env={**os.environ, "OPENAI_API_KEY": token, "ACCRL_MODEL_API_KEY": token},
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    args = {
        "token_reversed": token[::-1],
        "home": str(Path.home()),
        "port": listener.getsockname()[1],
        "marker": f"fibserve-orphan-{os.getpid()}-{base.name}",
        "bait_dir": str(base),
        "read": ["/etc/shadow", "/etc/hostname", str(state), str(shm), str(CHECKOUT / "pyproject.toml")],
        "write": [
            str(CHECKOUT / "pwned-by-candidate"),
            str(default_cache_dir() / "pwned-by-candidate"),
            str(base / "pwned-by-candidate"),
            "/usr/pwned",
            "/pwned",
        ],
        "exists": ["/home", str(Path.home() / ".ssh"), str(CHECKOUT / ".git"), str(state.parent), "/etc/ssh"],
    }
    try:
        yield Bait(args, token, args["marker"])
    finally:
        server.kill()
        server.wait()
        listener.close()
        shm.unlink(missing_ok=True)


def python_probe(bait: Bait) -> str:
    """The source of the hostile Python/Triton probe (``bench/kernels/hostile_probe.py``) for ``bait``."""
    template = string.Template((PROBES / "hostile_probe.py").read_text())
    return template.substitute(args=json.dumps(bait.args))


def hostile_cuda_solution(token: str, port: int, marker: str):
    """The hostile CUDA probe (``bench/kernels/hostile_probe.cu``) for vector_add_f32, filled in."""
    source = (PROBES / "hostile_probe.cu").read_text()
    for placeholder, value in {
        "@TOKEN_REVERSED@": token[::-1],
        "@PORT@": str(port),
        "@MARKER@": marker,
    }.items():
        source = source.replace(placeholder, value)
    return cuda_solution(source, name="hostile_probe", definition="vector_add_f32")


def findings_of(log: str) -> dict:
    """The JSON a hostile probe raised with (``FINDINGS {...}``, the last occurrence in ``log``)."""
    return json.loads(log.rsplit("FINDINGS ", 1)[1].splitlines()[0])


def processes_with(marker: str) -> list[int]:
    """Host pids (not zombies) whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            if marker.encode() in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, timeout_s: float = 5.0) -> list[int]:
    """The processes with ``marker`` still alive after up to ``timeout_s`` seconds (empty when all died)."""
    deadline = time.monotonic() + timeout_s
    while (alive := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def escaped_writes(writable: dict[str, bool]) -> list[str]:
    """The paths a probe could write (``findings["writable"]``) outside the sandbox's own ``/tmp``.

    ``/tmp`` inside is the worker's private tmpfs (its work dir, writable by design); a checkout under ``/tmp``
    shows there as the empty parent of its mounted venv, so a write into it lands in that tmpfs, never on the
    host (``written``, checked on the host side, says so)."""
    return [path for path, ok in writable.items() if ok and not path.startswith("/tmp/")]
