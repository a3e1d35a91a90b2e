"""The sandbox: limits, timeouts, and (where bubblewrap works) no network and a read-only root."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from fibserve.build.sandbox import Limits, bwrap_works, run_sandboxed


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    result = run_sandboxed(
        ["sh", "-c", "sleep 30 & sleep 30; echo never"],
        cwd=tmp_path,
        writable=[tmp_path],
        limits=Limits(timeout_s=1),
    )
    assert result.timed_out and result.returncode is None and "never" not in result.output
    assert result.wall_ms < 10_000


def test_memory_limit_applies(tmp_path: Path) -> None:
    code = "x = bytearray(512 * 1024 * 1024)"
    result = run_sandboxed(
        [sys.executable, "-c", code], cwd=tmp_path, writable=[tmp_path], limits=Limits(memory_bytes=256 << 20)
    )
    assert result.returncode != 0 and "MemoryError" in result.output


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not installed or cannot create namespaces here")
def test_bwrap_blocks_network_and_writes_outside_the_build_dir(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    outside = Path.home() / f".fibserve-sandbox-probe-{port}"
    script = (
        "import socket, pathlib\n"
        f"pathlib.Path({str(tmp_path / 'inside')!r}).write_text('ok')\n"
        "try:\n"
        f"    pathlib.Path({str(outside)!r}).write_text('escaped')\n"
        "except OSError as e:\n    print('write refused', e.errno)\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\n"
        "except OSError:\n    print('network refused')\n"
    )
    try:
        result = run_sandboxed(
            [sys.executable, "-c", script], cwd=tmp_path, writable=[tmp_path], mode="bwrap"
        )
    finally:
        server.close()
    assert result.sandbox == "bwrap"
    assert "write refused" in result.output and "network refused" in result.output, result.output
    assert (tmp_path / "inside").read_text() == "ok"
    assert not outside.exists()
