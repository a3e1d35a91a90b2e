"""Shared fixtures: the bundled trace set, candidate solutions built from files in ``kernels/``."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from fibserve.datasets import default_root
from fibserve.trace import Solution
from fibserve.trace.trace_set import TraceSet

KERNELS = Path(__file__).resolve().parent / "kernels"
BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="session")
def trace_set() -> TraceSet:
    return TraceSet.load([default_root()])


def build_solution_json(
    file: str, definition: str, *, language: str = "triton", dps: bool = True, name: str | None = None
) -> Solution:
    """A Solution whose single source is ``kernels/<file>``."""
    entry = "kernel.cu" if language == "cuda" else "kernel.py"
    spec = {
        "language": language,
        "target_hardware": ["sm_90a"],
        "entry_point": f"{entry}::run",
        "destination_passing_style": dps,
    }
    if language == "cuda":
        spec["binding"] = "tvm-ffi"
    return Solution.model_validate(
        {
            "name": name or Path(file).stem,
            "definition": definition,
            "author": "fibserve tests",
            "spec": spec,
            "sources": [{"path": entry, "content": (KERNELS / file).read_text()}],
        }
    )


@pytest.fixture(scope="session")
def make_solution():
    """:func:`build_solution_json` as a fixture (test modules here are not a package)."""
    return build_solution_json


@pytest.fixture(scope="session")
def load_benchmark():
    """A function: a script of ``benchmarks/`` (a path below it) as a module, so tests call its functions."""

    def load(relative: str):
        path = BENCHMARKS / relative
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def has_nvcc() -> bool:
    """Whether nvcc is on PATH."""
    return shutil.which("nvcc") is not None
