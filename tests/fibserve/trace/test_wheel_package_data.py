"""The bundled default trace set ships inside the fibserve wheel (hatchling package data)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from fibserve.datasets import default_root
from trace_helpers import REPO_ROOT


@pytest.mark.slow
def test_wheel_contains_every_bundled_trace_file(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH; cannot build the wheel")
    result = subprocess.run(
        [uv, "build", "--package", "fibserve", "--wheel", "--out-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if result.returncode != 0 and "hatchling" in result.stderr and "network" in result.stderr.lower():
        pytest.skip(f"could not fetch the build backend: {result.stderr[-300:]}")
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("fibserve-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = sorted(p for p in default_root().rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
    assert len(bundled) == 260  # 86 definitions, 86 workload files, 88 solutions
    for path in bundled:
        assert f"fibserve/datasets/default/{path.relative_to(default_root()).as_posix()}" in names
