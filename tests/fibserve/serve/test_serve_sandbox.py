"""A server says how candidates are confined: at start-up, in /health and in every result; without bubblewrap
it starts but refuses candidates with an install hint; --unsafe-no-sandbox runs them, loudly."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from pathlib import Path

import httpx
import pytest
from fibserve.client import FIBServeClient
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution

pytestmark = pytest.mark.slow


def _path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with the usual tools but no bwrap (links to everything in the directories of PATH but it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for tool in ("nvcc", "gcc", "cc", "g++", "sh", Path(sys.executable).name):
            found = Path(directory) / tool
            if found.is_file() and not (bin_dir / tool).exists():
                (bin_dir / tool).symlink_to(found)
    assert shutil.which("bwrap", path=str(bin_dir)) is None
    return str(bin_dir)


def test_without_bubblewrap_the_server_starts_and_refuses_candidates(start_server, tmp_path: Path) -> None:
    server = start_server("--devices", "cpu", env={"PATH": _path_without_bwrap(tmp_path)})
    health = httpx.get(server.url + "/health", timeout=10).json()
    assert health["status"] == "degraded" and health["sandbox"]["mode"] == "unavailable"
    assert "apt-get install bubblewrap" in health["sandbox"]["detail"]
    assert "candidates will be refused" in server.log()
    with FIBServeClient(server.url) as client:
        answer = client.wait(client.submit_evaluate(triton_add_solution(), [VECTOR_ADD_SMALL]), timeout=120)
    assert answer.status == "failed" and answer.error.code == "sandbox_unavailable"
    assert "--unsafe-no-sandbox" in answer.error.message


TOKEN = "fibserve-serve-T3st-token-4b1d9e"


def test_unsafe_no_sandbox_is_loud_in_the_log_health_and_results(start_server) -> None:
    server = start_server("--devices", "cpu", "--unsafe-no-sandbox", "--token", TOKEN)
    health = httpx.get(server.url + "/health", timeout=10).json()
    assert health["sandbox"]["mode"] == "unsafe-none" and health["sandbox"]["detail"].startswith("UNSAFE")
    assert "UNSAFE: NO SANDBOX" in server.log()
    leaking = triton_add_solution(
        name="leaks the token",
        body=f"def run(x, y, z):\n    raise RuntimeError('token: {'.'.join(TOKEN[::-1])}')\n",
    )
    with FIBServeClient(server.url, token=TOKEN) as client:
        answer = client.wait(client.submit_evaluate(triton_add_solution(), [VECTOR_ADD_SMALL]), timeout=240)
        leaked_id = client.submit_evaluate(leaking, [VECTOR_ADD_SMALL])
        leaked = client.wait(leaked_id, timeout=240)
    assert answer.status == "completed" and answer.sandbox == "unsafe-none"
    assert "UNSAFE" in (answer.logs or "")
    # The second line of defence: an encoded token in a candidate's error is redacted before it is stored.
    log = leaked.traces[0].evaluation.log
    assert "RuntimeError: token: <redacted>" in log
    with sqlite3.connect(server.state_dir / "tasks.sqlite3") as db:
        (stored,) = db.execute("SELECT result FROM tasks WHERE id = ?", (leaked_id,)).fetchone()
    for form in (TOKEN, ".".join(TOKEN[::-1])):
        assert form not in log and form not in stored
