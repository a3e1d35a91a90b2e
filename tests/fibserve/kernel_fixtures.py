"""The hand-written kernels in tests/fibserve/kernels, wrapped as solutions (for the analysis and build tests).

Imported as ``from kernel_fixtures import ...``: tests/fibserve is on ``sys.path`` because pytest (default
``prepend`` import mode) inserts the directory of tests/fibserve/conftest.py before it imports any test below.
"""

from __future__ import annotations

from pathlib import Path

from fibserve.trace import Solution

KERNELS = Path(__file__).resolve().parent / "kernels"


def fixture_solution(file_name: str, *, entry_file: str | None = None) -> Solution:
    """Wrap tests/fibserve/kernels/<file_name> as a Solution the way `fibserve check FILE` does."""
    from fibserve.static_check import solution_from_path

    solution = solution_from_path(KERNELS / file_name, "test_definition")
    if entry_file is not None:
        solution = solution.model_copy(update={"name": entry_file})
    return solution
