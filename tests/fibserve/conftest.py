"""Hooks for every test under tests/fibserve: skipping nvcc tests where nvcc is missing.

The test directories are not packages (no ``__init__.py``), so this conftest applies to all of them. The
run-wide build cache (the ``build_cache`` fixture) is in tests/conftest.py.
"""

from __future__ import annotations

import shutil

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip nvcc-marked tests with a clear reason where nvcc is not installed."""
    if shutil.which("nvcc") is None:
        skip = pytest.mark.skip(reason="nvcc is not on PATH")
        for item in items:
            if "nvcc" in item.keywords:
                item.add_marker(skip)
