"""Fixtures that start a real `fibserve serve` process on 127.0.0.1 (no mocks, no in-process test client)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import ServerProcess


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator:
    """Factory: ``start_server(*args, env=..., state_dir=...)`` starts a server; all are killed afterwards."""
    servers: list[ServerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, state_dir: Path | None = None) -> ServerProcess:
        server = ServerProcess(state_dir or tmp_path / "state", list(args), env)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.kill()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server on the bundled trace set with CPU lanes, shared by the read-only tests of a module."""
    state = tmp_path_factory.mktemp("shared") / "state"
    server = ServerProcess(state, ["--devices", "cpu"])
    server.start()
    yield server
    server.kill()
