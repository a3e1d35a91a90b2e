"""Paths for the reference-kernel tests: the bundled gemm_n7168_k5120 CUDA and Triton sources."""

from __future__ import annotations

from pathlib import Path

import pytest

GEMM_DIR = (
    Path(__file__).resolve().parents[3]
    / "packages/fibserve/src/fibserve/datasets/reference_kernels/gemm_n7168_k5120"
)


@pytest.fixture(scope="session")
def gemm_dir() -> Path:
    """Folder holding kernel.cu and kernel.py for gemm_n7168_k5120."""
    return GEMM_DIR
