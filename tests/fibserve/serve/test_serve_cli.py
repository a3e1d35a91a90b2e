"""`fibserve serve` refuses bad options with a message and exit status 2, before binding anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fibserve", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_help_lists_the_options(tmp_path: Path) -> None:
    result = _serve("--help", cwd=tmp_path)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for option in (
        "--local",
        "--devices",
        "--host",
        "--port",
        "--config",
        "--token",
        "--state-dir",
        "--max-body-mb",
    ):
        assert option in text
    # rich markup would swallow an unescaped "[default: ...]" and leave "folder ."
    assert "Task database folder [default:" in text and "folder ." not in text


def test_a_device_that_is_not_there_is_refused(tmp_path: Path) -> None:
    result = _serve("--devices", "cuda:63", "--state-dir", str(tmp_path / "s"), "--port", "0", cwd=tmp_path)
    assert result.returncode == 2
    wanted = ("no CUDA device is visible here; use --devices cpu", "cuda:63 is not visible here")
    assert any(message in result.stderr for message in wanted)


def test_a_malformed_device_name_is_refused(tmp_path: Path) -> None:
    result = _serve("--devices", "gpu0", "--state-dir", str(tmp_path / "s"), cwd=tmp_path)
    assert result.returncode == 2
    assert "'gpu0' is not 'cpu' or 'cuda:N'" in result.stderr


def test_a_missing_trace_set_root_is_refused(tmp_path: Path) -> None:
    result = _serve(
        "--local",
        str(tmp_path / "nope"),
        "--devices",
        "cpu",
        "--state-dir",
        str(tmp_path / "s"),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "nope" in result.stderr


def test_a_broken_evaluation_config_is_refused_at_start(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("defaults:\n  atol: -1\n")
    result = _serve(
        "--config", str(config), "--devices", "cpu", "--state-dir", str(tmp_path / "s"), cwd=tmp_path
    )
    assert result.returncode == 2
    assert "atol" in result.stderr
