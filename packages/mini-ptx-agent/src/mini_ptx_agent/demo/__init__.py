"""The bundled demo trajectories: recorded turns replayed as the model ``demo``, never a model's output.

The kernels were written by the PTXBench authors to show what the loop does. Each trajectory is assembled at
run time from the package files, so each kernel has exactly one copy. ``--model demo`` (``ptxbench run``, an
experiment's ``models: [demo]``) picks the demo of the run's definition and language; the quickstart replays
the GEMM one when no model is configured.

``vector_add_f32`` in Triton (runs on a CPU, under the Triton interpreter): the way through the loop without
a key and without a GPU.

=====  ===================================================================================================
turn   Triton (``kernel.py``)
=====  ===================================================================================================
1      ``demo/vector_add/turn1_floor_grid.py``: wrong on purpose, a grid of ``N // 1024`` programs drops the
       tail, so the N = 1000 workload fails (INCORRECT_NUMERICAL)
2      ``demo/vector_add/turn2_masked.py``: ``triton.cdiv`` grid and masked loads and stores: PASSED
=====  ===================================================================================================

``gemm_n7168_k5120`` (the quickstart's; ``C[M, N] = A[M, K] @ B[N, K]^T`` for bf16 operands, every kernel
correct for any M):

=====  ===========================================  ===============================================
turn   CUDA (``kernel.cu``, tvm-ffi)                Triton (``kernel.py``)
=====  ===========================================  ===============================================
1      ``demo/cuda/turn1_simt.cu``: one thread per  ``demo/triton/turn1_dot.py``: 64 x 64 ``tl.dot``
       output, SIMT dot product                     tiles with masked pointer loads
2      ``demo/cuda/turn2_tiled.cu``: 128 x 128      ``demo/triton/turn2_tiled.py``: 128 x 128 x 64,
       shared-memory tiles, 8 x 8 per thread        grouped order, 4 stages
3      fibserve's reference Hopper kernel           fibserve's reference Triton kernel (TMA
       (TMA + wgmma + warp specialization)          descriptors, persistent)
=====  ===========================================  ===============================================

The replies are replayed whatever the feedback says (NOT_EXECUTED on a machine without a GPU, PASSED with
speedups on one), so their prose states what each kernel does and never what an earlier turn's feedback was.
A demo trajectory is flagged (``info.ptxbench.demo``, and ``demo`` in the run's ``plan.json`` and
``summary.json``): its kernels are not a model's output, and reports and training-data pipelines skip it
(docs/run-directory.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..extraction import fenced

DEMO_DEFINITION = "gemm_n7168_k5120"
"""The definition of the quickstart's demo."""

DEMO_MODEL_NAME = "demo"
"""The model name that replays a bundled demo (``--model demo``), recorded as the model of a demo run (plan.json,
solutions' author): never mistaken for a real model, and resolved again when the run is resumed."""

DEMO_MODEL_NAMES = (DEMO_MODEL_NAME, "ptxbench-demo-replay")
"""Names that select the demo: ``demo``, and the name quickstarts recorded before it (so they resume)."""

_HERE = Path(__file__).resolve().parent

_TURNS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("vector_add_f32", "triton"): [
        (
            "A first version: one program per 1024 elements, each loading x and y and storing their sum.",
            "vector_add/turn1_floor_grid.py",
        ),
        (
            "The grid now rounds up with triton.cdiv, and every load and store is masked past N, so a length "
            "that is not a multiple of the block size is covered too.",
            "vector_add/turn2_masked.py",
        ),
    ],
    (DEMO_DEFINITION, "cuda"): [
        (
            "A first, simple version: one thread per element of C, a plain fp32 dot product over K on the CUDA "
            "cores. It aims at correctness before any optimisation.",
            "cuda/turn1_simt.cu",
        ),
        (
            "Next, data reuse: this version stages 128 x 16 slices of A and B in shared memory and gives every "
            "thread an 8 x 8 register tile, so each value loaded from shared memory feeds 8 FMAs instead of one. "
            "It still uses CUDA cores only.",
            "cuda/turn2_tiled.cu",
        ),
        (
            "To approach cuBLAS on Hopper the kernel must use the tensor cores asynchronously: TMA "
            "(cp.async.bulk.tensor) loads with 128-byte swizzle into a multi-stage mbarrier ring, a producer "
            "warpgroup and two consumer warpgroups issuing wgmma.mma_async (setmaxnreg rebalances registers), "
            "a persistent grouped tile schedule and an stmatrix epilogue.",
            "reference:kernel.cu",
        ),
    ],
    (DEMO_DEFINITION, "triton"): [
        (
            "A first, simple version: one program per 64 x 64 tile of C, tl.dot over 32-wide k steps with "
            "masked loads.",
            "triton/turn1_dot.py",
        ),
        (
            "Larger 128 x 128 x 64 tiles, a grouped program order for L2 reuse of B, 4 pipeline stages and 8 "
            "warps.",
            "triton/turn2_tiled.py",
        ),
        (
            "TMA tensor descriptors (zero fill past M), a persistent grid of one program per SM in grouped "
            "order, and 128 x 256 tiles for large M.",
            "reference:kernel.py",
        ),
    ],
}


class DemoDataError(FileNotFoundError):
    """A demo kernel file is missing from the installed packages (a broken install)."""


def demos() -> list[tuple[str, str]]:
    """Every bundled demo as (definition, language)."""
    return list(_TURNS)


def describe_demos() -> str:
    """The bundled demos for people: ``vector_add_f32 (triton), gemm_n7168_k5120 (cuda, triton)``."""
    languages: dict[str, list[str]] = {}
    for definition, language in _TURNS:
        languages.setdefault(definition, []).append(language)
    return ", ".join(f"{definition} ({', '.join(names)})" for definition, names in languages.items())


def _turns(definition: str, language: str) -> list[tuple[str, str]]:
    """The (prose, kernel file) of each turn of one demo.

    Raises:
        ValueError: no demo for that definition and language (the message lists the demos).
    """
    if (definition, language) not in _TURNS:
        raise ValueError(
            f"there is no demo trajectory of {definition} in {language}; the bundled demos are {describe_demos()}"
        )
    return _TURNS[(definition, language)]


def reference_kernel_dir() -> Path:
    """fibserve's reference kernels for the GEMM demo's definition (``kernel.cu``, ``kernel.py``).

    Raises:
        DemoDataError: fibserve's package data is missing.
    """
    from fibserve.datasets import default_root

    path = default_root().parent / "reference_kernels" / DEMO_DEFINITION
    if not path.is_dir():
        raise DemoDataError(f"fibserve's reference kernels are missing at {path}; reinstall fibserve")
    return path


def kernel_source(spec: str) -> str:
    """Text of one demo kernel: ``reference:<file>`` (fibserve's reference kernels) or a path under ``demo/``.

    Raises:
        DemoDataError: the file is missing.
    """
    if spec.startswith("reference:"):
        path = reference_kernel_dir() / spec.removeprefix("reference:")
    else:
        path = _HERE / spec
    if not path.is_file():
        raise DemoDataError(f"demo kernel {path} is missing; reinstall mini-ptx-agent and fibserve")
    return path.read_text(encoding="utf-8")


def kernel_sources(language: str, definition: str = DEMO_DEFINITION) -> list[str]:
    """The demo kernels of ``definition`` in ``language`` (``cuda`` or ``triton``), in turn order.

    Raises:
        ValueError: no such demo.
        DemoDataError: a kernel file is missing.
    """
    return [kernel_source(spec) for _, spec in _turns(definition, language)]


def demo_trajectory(language: str, definition: str = DEMO_DEFINITION) -> dict[str, Any]:
    """The demo of ``definition`` in ``language`` as a ``mini-swe-agent-1.1`` trajectory: one assistant message
    per turn, each one whole kernel.

    Only the assistant messages matter for a replay; system and user messages are placeholders that say
    where the real ones come from. ``info.ptxbench.demo`` (true) marks the file as a demo, as in every run
    trajectory that replays it; ``info.ptxbench_demo`` says what it holds.

    Raises:
        ValueError, DemoDataError: see :func:`kernel_sources`.
    """
    tag = "cuda" if language == "cuda" else "python"
    turns = _turns(definition, language)
    sources = kernel_sources(language, definition)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "(the run's system prompt is composed by mini-ptx-agent)"},
        {"role": "user", "content": f"(the run's task message carries the {definition} definition)"},
    ]
    for turn, ((prose, spec), source) in enumerate(zip(turns, sources, strict=True), start=1):
        if turn > 1:
            messages.append({"role": "user", "content": "(evaluation feedback of the previous turn)"})
        messages.append(
            {
                "role": "assistant",
                "content": f"Turn {turn}. {prose}\n\n{fenced(source, tag)}\n",
                "extra": {"demo_source": spec},
            }
        )
    return {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {
            "ptxbench": {"demo": True},
            "ptxbench_demo": {
                "definition": definition,
                "language": language,
                "note": "Demo replay: kernels written by the PTXBench authors, not by a model.",
                "sources": [spec for _, spec in turns],
            },
        },
        "messages": messages,
    }


def write_demo_trajectory(language: str, path: Path, definition: str = DEMO_DEFINITION) -> Path:
    """Write :func:`demo_trajectory` to ``path`` (parents created); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(demo_trajectory(language, definition), indent=2) + "\n", encoding="utf-8")
    return path
