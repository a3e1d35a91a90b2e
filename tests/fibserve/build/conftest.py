"""Fixtures for the build tests: the hand-written kernels in tests/fibserve/kernels and a shared build cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fibserve.trace import Solution

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def fixture_solution(file_name: str, *, entry_file: str | None = None) -> Solution:
    """Wrap tests/fibserve/kernels/<file_name> as a Solution the way `fibserve check FILE` does."""
    from fibserve.static_check import solution_from_path

    solution = solution_from_path(KERNELS / file_name, "test_definition")
    if entry_file is not None:
        solution = solution.model_copy(update={"name": entry_file})
    return solution


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole session, shared with tests/fibserve/analysis (same base temp dir)."""
    path = tmp_path_factory.getbasetemp() / "fibserve-build-cache"
    path.mkdir(exist_ok=True)
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("nvcc") is None:
        skip = pytest.mark.skip(reason="nvcc is not on PATH")
        for item in items:
            if "nvcc" in item.keywords:
                item.add_marker(skip)
