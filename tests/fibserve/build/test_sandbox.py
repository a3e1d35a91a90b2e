"""The sandbox: limits, timeouts, and (where bubblewrap works) no network and a read-only root."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from fibserve.build.sandbox import Limits, bwrap_works, resolve_mode, run_sandboxed


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
    outside = Path(sys.prefix) / f"fibserve-sandbox-probe-{port}"  # on the read-only root
    in_home = Path.home() / f".fibserve-sandbox-probe-{port}"  # the home is a throw-away tmpfs
    script = (
        "import socket, pathlib\n"
        f"pathlib.Path({str(tmp_path / 'inside')!r}).write_text('ok')\n"
        "try:\n"
        f"    pathlib.Path({str(outside)!r}).write_text('escaped')\n"
        "except OSError as e:\n    print('write refused', e.errno)\n"
        f"pathlib.Path({str(in_home)!r}).write_text('gone')\n"
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
    assert not outside.exists() and not in_home.exists()


@pytest.mark.nvcc
def test_compile_log_cannot_leak_the_environment_or_home_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibserve.build import BuildStatus, build_solution
    from fibserve.trace import Solution

    home = tmp_path / "home"
    home.mkdir()
    (home / "token.txt").write_text("HOME_SECRET_4242 = 1;\n")
    monkeypatch.setenv("FIBSERVE_TEST_SECRET", "ENV_SECRET_1717")
    sandboxed = resolve_mode() == "bwrap"
    if sandboxed:
        monkeypatch.setenv("HOME", str(home))
    source = f'#include "/proc/self/environ"\n#include "{home}/token.txt"\n'
    solution = Solution.model_validate(
        {
            "name": "leak",
            "definition": "d",
            "author": "a",
            "spec": {
                "language": "cuda",
                "target_hardware": ["x"],
                "entry_point": "k.cu::run",
                "binding": "tvm-ffi",
            },
            "sources": [{"path": "k.cu", "content": source}],
        }
    )
    result = build_solution(solution, cache_dir=tmp_path / "cache")
    assert result.status == BuildStatus.COMPILE_ERROR
    # procfs files report size 0, so today's preprocessors read nothing from environ; the minimal
    # environment is defence in depth. Without bubblewrap the token file *is* quoted back (see below).
    assert "ENV_SECRET_1717" not in result.log
    assert result.sandbox == ("bwrap" if sandboxed else "none")
    if sandboxed:
        assert "HOME_SECRET_4242" not in result.log and "No such file" in result.log
    else:
        assert "HOME_SECRET_4242" in result.log  # the leak the sandbox closes


def test_only_paths_hidden_by_a_tmpfs_are_bound_again(tmp_path: Path) -> None:
    """A readable directory outside /tmp and the home is already visible; binding it again broke builds on
    the H200, where /usr/local/cuda is a symbolic link and bwrap could not create the mount point."""
    from fibserve.build.sandbox import under_hidden_roots

    real = tmp_path / "cuda-13.0" / "bin"
    real.mkdir(parents=True)
    link = tmp_path / "cuda"
    link.symlink_to(tmp_path / "cuda-13.0")
    outside = Path(__file__).resolve().parent
    kept = under_hidden_roots([link / "bin", real, outside, tmp_path / "missing"], [tmp_path])
    assert kept == [real.resolve()]
