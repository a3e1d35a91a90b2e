"""Paths for the reference-kernel tests: the bundled gemm_n7168_k5120 CUDA and Triton sources."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

GEMM_DIR = (
    Path(__file__).resolve().parents[3]
    / "packages/fibserve/src/fibserve/datasets/reference_kernels/gemm_n7168_k5120"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip nvcc-marked tests with a clear reason where nvcc is not installed."""
    if shutil.which("nvcc") is None:
        skip = pytest.mark.skip(reason="nvcc is not on PATH")
        for item in items:
            if "nvcc" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def gemm_dir() -> Path:
    """Folder holding kernel.cu and kernel.py for gemm_n7168_k5120."""
    return GEMM_DIR
