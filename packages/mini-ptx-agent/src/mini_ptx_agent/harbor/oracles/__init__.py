"""The oracle kernel of a Harbor task: a kernel known to pass, which ``solution/solve.sh`` writes.

Two sources, in this order: the PTXBench reference kernels of the bundled trace set
(``fibserve.datasets.reference_solutions``: the TMA + wgmma CUDA GEMM and the Triton GEMM of
``gemm_n7168_k5120``), then the Triton kernels in this folder, one per float32 CI definition
(``<definition>/kernel.py``; they pass on the Triton CPU interpreter, so the oracle runs without a GPU).
A definition with neither has no oracle: its task's ``solve.sh`` says so and fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...task import ENTRY_FILES

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Oracle:
    """A kernel that passes a definition's workloads."""

    file: str
    """``kernel.cu`` or ``kernel.py``."""
    source: str
    origin: str
    """Where it comes from, for the task's README: a Solution name or this folder's file."""


def find_oracle(definition: str, language: str) -> Oracle | None:
    """The oracle of ``definition`` in ``language`` (``cuda`` or ``triton``), or None when there is none."""
    from fibserve.datasets.reference_solutions import REFERENCE_KERNELS, reference_solution

    for kernel in REFERENCE_KERNELS:
        if kernel.definition == definition and kernel.language == language:
            solution = reference_solution(kernel)
            return Oracle(kernel.file, solution.entry_source().content, f"Solution {solution.name}")
    path = HERE / definition / ENTRY_FILES[language]
    if path.is_file():
        return Oracle(
            path.name, path.read_text(encoding="utf-8"), f"mini_ptx_agent/harbor/oracles/{definition}"
        )
    return None
