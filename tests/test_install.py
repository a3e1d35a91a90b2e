"""Bytecode is compiled once, when the environment is installed, never by every ``uv run``."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_installs_compile_bytecode_and_the_project_settings_do_not() -> None:
    """``compile-bytecode`` in ``[tool.uv]`` made every ``uv run`` re-compile the whole environment (1-3 s and a
    "Bytecode compiled 18692 files" line before each command); the installs compile it once instead."""
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]
    assert "compile-bytecode" not in settings
    syncs = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("uv sync")]
    assert syncs and all("--compile-bytecode" in line for line in syncs)
    for dockerfile in sorted((REPO / "docker").glob("Dockerfile.*")):
        text = dockerfile.read_text()
        if dockerfile.suffix != ".dockerignore" and "uv sync" in text:
            assert re.search(r"UV_COMPILE_BYTECODE=1\b", text), dockerfile.name


def test_uv_run_prints_nothing_of_its_own() -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    done = subprocess.run(
        [uv, "run", "--frozen", "python", "-c", "print('ok')"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n" and "Bytecode compiled" not in done.stderr, done.stderr
