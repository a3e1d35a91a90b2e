"""The state directory holds every candidate's source and result: it is private to the server's user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fibserve.client import FIBServeClient
from fibserve.serve.store import TaskStore
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_servers_state_dir_is_0700_and_its_files_0600(start_server, tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = start_server("--devices", "cpu", state_dir=state)
    with FIBServeClient(server.url) as client:
        client.submit("evaluate", triton_add_solution(), workload_uuids=[VECTOR_ADD_SMALL])
    assert _mode(state) == 0o700
    files = sorted(p.name for p in state.iterdir() if p.is_file())
    assert {"tasks.sqlite3", "tasks.sqlite3-wal", "tasks.sqlite3-shm", "tasks.sqlite3.lock"} <= set(files)
    assert {name: _mode(state / name) for name in files} == dict.fromkeys(files, 0o600)


def test_a_store_tightens_files_left_readable_by_an_older_server(tmp_path: Path) -> None:
    state = tmp_path / "old-state"
    TaskStore(state / "tasks.sqlite3").close()
    os.chmod(state, 0o755)
    for path in state.iterdir():
        os.chmod(path, 0o644)
    store = TaskStore(state / "tasks.sqlite3")
    store.submit("evaluate", "d", "s", {})
    assert _mode(state) == 0o700
    assert {p.name: _mode(p) for p in state.iterdir()} == {p.name: 0o600 for p in state.iterdir()}
    store.close()
