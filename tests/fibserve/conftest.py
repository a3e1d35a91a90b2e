"""Fixtures and hooks for every test under tests/fibserve: a shared build cache, and skipping nvcc tests.

The test directories are not packages (no ``__init__.py``), so this conftest applies to all of them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the whole session, shared by tests/fibserve/analysis and tests/fibserve/build."""
    path = tmp_path_factory.getbasetemp() / "fibserve-build-cache"
    path.mkdir(exist_ok=True)
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip nvcc-marked tests with a clear reason where nvcc is not installed."""
    if shutil.which("nvcc") is None:
        skip = pytest.mark.skip(reason="nvcc is not on PATH")
        for item in items:
            if "nvcc" in item.keywords:
                item.add_marker(skip)
