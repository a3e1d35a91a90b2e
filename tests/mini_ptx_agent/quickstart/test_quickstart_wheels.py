"""The demo's kernels ship in the wheels: mini-ptx-agent's demo files and fibserve's reference kernels."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "packages/mini-ptx-agent/src/mini_ptx_agent/demo"


def _wheel_names(package: str, out: Path) -> set[str]:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH; cannot build the wheel")
    done = subprocess.run(
        [uv, "build", "--package", package, "--wheel", "--out-dir", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    if done.returncode != 0 and "hatchling" in done.stderr and "network" in done.stderr.lower():
        pytest.skip(f"could not fetch the build backend: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = out.glob(f"{package.replace('-', '_')}-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


@pytest.mark.slow
def test_wheels_carry_every_demo_kernel(tmp_path):
    names = _wheel_names("mini-ptx-agent", tmp_path / "agent")
    demo_files = sorted(p for p in DEMO.rglob("*") if p.is_file() and p.suffix in (".cu", ".py"))
    assert len(demo_files) == 7  # the module, the CUDA and Triton GEMM turns, the vector add's two turns
    for path in demo_files:
        assert f"mini_ptx_agent/demo/{path.relative_to(DEMO).as_posix()}" in names
    assert "mini_ptx_agent/experiments/configs/ci-smoke.yaml" in names  # the no-key experiment
    names = _wheel_names("fibserve", tmp_path / "fibserve")
    for name in ("kernel.cu", "kernel.py"):
        assert f"fibserve/datasets/reference_kernels/gemm_n7168_k5120/{name}" in names
