"""Helpers for the trace data-model tests: the public data next to the repository, and file builders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def shared(name: str) -> Path:
    """A folder of the shared public data; skips the test when it is not present on this machine."""
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(f"public data {name} not found at ../shared/data (only present on PTXBench dev machines)")
    return path


GEMM_DEFINITION = {
    "name": "gemm_small",
    "op_type": "gemm",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}, "K": {"type": "const", "value": 4}},
    "inputs": {
        "A": {"shape": ["M", "K"], "dtype": "float32"},
        "B": {"shape": ["N", "K"], "dtype": "float32"},
    },
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(A, B):\n    return A @ B.T\n",
}


def workload_line(uuid: str, m: int, definition: str = "gemm_small") -> str:
    """One workload-trace JSONL line for ``gemm_small``."""
    workload = {"uuid": uuid, "axes": {"M": m}, "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}}
    return json.dumps({"definition": definition, "workload": workload, "solution": None, "evaluation": None})


def make_root(
    path: Path,
    definitions: dict[str, object] | None = None,
    workloads: dict[str, str] | None = None,
    solutions: dict[str, object] | None = None,
    traces: dict[str, str] | None = None,
) -> Path:
    """Write a trace-set root: ``{relative file name: JSON object or raw text}`` per kind."""
    for kind, files in (
        ("definitions", definitions),
        ("workloads", workloads),
        ("solutions", solutions),
        ("traces", traces),
    ):
        for name, content in (files or {}).items():
            target = path / kind / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    path.mkdir(parents=True, exist_ok=True)
    return path
