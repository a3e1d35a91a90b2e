"""The PTXBench reference kernels as Solutions of the bundled trace set.

The kernel sources under ``reference_kernels/<definition>/`` are the single source of truth. This module
wraps them into FlashInfer Trace :class:`~fibserve.trace.Solution` objects (author ``ptxbench``) and writes
them as ``default/solutions/<op_type>/<definition>/<solution>.json``, so that
``TraceSet.load(default_root())`` lists them next to the definitions they implement. The JSON files are
committed; a test rebuilds them from the kernel files and fails when they differ. After editing a kernel::

    uv run python -m fibserve.datasets.reference_solutions

Only the standard library and :mod:`fibserve.trace` are imported (no torch, no triton).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from fibserve.trace import BuildSpec, Solution, SourceFile

KERNELS_ROOT = Path(__file__).resolve().parent / "reference_kernels"
"""Folder holding one sub-folder of kernel sources per definition."""

AUTHOR = "ptxbench"
"""Author of every reference solution."""


@dataclass(frozen=True)
class ReferenceKernel:
    """One reference kernel file and how FIBServe should build and call it."""

    name: str
    """Solution name (unique in the trace set)."""
    definition: str
    """Definition it implements; also the folder under :data:`KERNELS_ROOT`."""
    op_type: str
    """The definition's ``op_type`` (first folder level of the solution JSON)."""
    file: str
    """Kernel file inside the definition folder, also the source path in the Solution."""
    language: str
    """``cuda`` or ``triton``."""
    binding: str | None
    """``tvm-ffi`` for CUDA, None for Triton."""
    dependencies: tuple[str, ...]
    """Runtime dependencies, pip-style."""
    description: str
    """One paragraph for people choosing a baseline."""


REFERENCE_KERNELS: tuple[ReferenceKernel, ...] = (
    ReferenceKernel(
        name="gemm_n7168_k5120_ptxbench_cuda_wgmma_tma",
        definition="gemm_n7168_k5120",
        op_type="gemm",
        file="kernel.cu",
        language="cuda",
        binding="tvm-ffi",
        dependencies=("apache-tvm-ffi",),
        description=(
            "PTXBench reference Hopper GEMM in CUDA with inline PTX: TMA (cp.async.bulk.tensor) loads into a "
            "4-6 stage shared-memory ring guarded by mbarriers, wgmma m64nNk16 from shared memory, a producer "
            "warpgroup and two consumer warpgroups with setmaxnreg, a persistent grid in grouped tile order, "
            "128 x {128, 224, 256} x 64 tiles chosen by M, and a stmatrix-staged bf16 epilogue. "
            "Source: fibserve/datasets/reference_kernels/gemm_n7168_k5120/kernel.cu (see the README there); "
            "H200 numbers: benchmarks/hopper_gemm/RESULTS.md."
        ),
    ),
    ReferenceKernel(
        name="gemm_n7168_k5120_ptxbench_triton_tma",
        definition="gemm_n7168_k5120",
        op_type="gemm",
        file="kernel.py",
        language="triton",
        binding=None,
        dependencies=("triton >= 3.6",),
        description=(
            "PTXBench reference Hopper GEMM in Triton: host-side TMA tensor descriptors, a persistent grid of "
            "132 programs in grouped tile order, fixed H200 configurations (128 x 256 x 64 tiles, 3 stages, "
            "8 warps; 128 x 128 x 64 with 4 stages for small M); no torch ops. "
            "Source: fibserve/datasets/reference_kernels/gemm_n7168_k5120/kernel.py; "
            "H200 numbers: benchmarks/hopper_gemm/RESULTS.md."
        ),
    ),
)
"""Every reference kernel that is published as a Solution of the bundled trace set."""


def reference_solution(kernel: ReferenceKernel, kernels_root: Path = KERNELS_ROOT) -> Solution:
    """The Solution for ``kernel``, its source read from ``kernels_root/<definition>/<file>``.

    Raises:
        FileNotFoundError: the kernel file is missing.
    """
    content = (kernels_root / kernel.definition / kernel.file).read_text()
    spec = BuildSpec(
        language=kernel.language,
        target_hardware=["NVIDIA_H200"],
        entry_point=f"{kernel.file}::run",
        dependencies=list(kernel.dependencies),
        destination_passing_style=True,
        binding=kernel.binding,
    )
    return Solution(
        name=kernel.name,
        definition=kernel.definition,
        author=AUTHOR,
        description=kernel.description,
        spec=spec,
        sources=[SourceFile(path=kernel.file, content=content)],
    )


def reference_solutions(kernels_root: Path = KERNELS_ROOT) -> list[Solution]:
    """All reference Solutions, in :data:`REFERENCE_KERNELS` order."""
    return [reference_solution(k, kernels_root) for k in REFERENCE_KERNELS]


def solution_path(kernel: ReferenceKernel) -> Path:
    """Path of the solution JSON relative to a trace-set root."""
    return Path("solutions") / kernel.op_type / kernel.definition / f"{kernel.name}.json"


def write_reference_solutions(out: Path, kernels_root: Path = KERNELS_ROOT) -> list[Path]:
    """Write every reference Solution as JSON under the trace-set root ``out``; returns the written files."""
    written: list[Path] = []
    for kernel in REFERENCE_KERNELS:
        path = out / solution_path(kernel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(reference_solution(kernel, kernels_root).model_dump_json(indent=2) + "\n")
        written.append(path)
    return written


def main() -> None:
    """Command-line entry: ``--out DIR`` (default: the bundled default trace set)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "default")
    args = parser.parse_args()
    files = write_reference_solutions(args.out)
    print(f"wrote {len(files)} solution files under {args.out}")


if __name__ == "__main__":
    main()
