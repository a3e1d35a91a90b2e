"""The bundled demo trajectory of the quickstart: three recorded turns, replayed when no model is configured.

It is **not a model's output**: the kernels were written by the PTXBench authors to show what the loop does.
The trajectory is assembled at run time from the package files, so each kernel has exactly one copy:

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

Every kernel computes ``C[M, N] = A[M, K] @ B[N, K]^T`` for bf16 operands and is correct for any M.

The replies are replayed whatever the feedback says (NOT_EXECUTED on a machine without a GPU, PASSED with
speedups on one), so their prose states what each kernel does and never what an earlier turn's feedback was.
A demo trajectory is flagged (``info.ptxbench.demo``, and ``demo`` in the run's ``plan.json`` and
``summary.json``): its kernels are not a model's output, and training-data pipelines must skip it
(docs/run-directory.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..extraction import fenced

DEMO_DEFINITION = "gemm_n7168_k5120"
"""The definition the demo kernels solve."""

DEMO_MODEL_NAME = "ptxbench-demo-replay"
"""Model name recorded for a demo run (plan.json, solutions' author): never mistaken for a real model."""

_HERE = Path(__file__).resolve().parent

_TURNS: dict[str, list[tuple[str, str]]] = {
    "cuda": [
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
    "triton": [
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


def reference_kernel_dir() -> Path:
    """fibserve's reference kernels for the demo definition (``kernel.cu``, ``kernel.py``).

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


def kernel_sources(language: str) -> list[str]:
    """The three demo kernels of ``language`` (``cuda`` or ``triton``), in turn order.

    Raises:
        ValueError: unknown language.
        DemoDataError: a kernel file is missing.
    """
    if language not in _TURNS:
        raise ValueError(f"no demo trajectory for language {language!r}; use one of {sorted(_TURNS)}")
    return [kernel_source(spec) for _, spec in _TURNS[language]]


def demo_trajectory(language: str) -> dict[str, Any]:
    """The demo as a ``mini-swe-agent-1.1`` trajectory: three assistant messages, each one whole kernel.

    Only the assistant messages matter for a replay; system and user messages are placeholders that say
    where the real ones come from. ``info.ptxbench.demo`` (true) marks the file as a demo, as in every run
    trajectory that replays it; ``info.ptxbench_demo`` says what it holds.

    Raises:
        ValueError, DemoDataError: see :func:`kernel_sources`.
    """
    tag = "cuda" if language == "cuda" else "python"
    sources = kernel_sources(language)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "(the run's system prompt is composed by mini-ptx-agent)"},
        {"role": "user", "content": f"(the run's task message carries the {DEMO_DEFINITION} definition)"},
    ]
    for turn, ((prose, spec), source) in enumerate(zip(_TURNS[language], sources, strict=True), start=1):
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
                "definition": DEMO_DEFINITION,
                "language": language,
                "note": "Demo replay: kernels written by the PTXBench authors, not by a model.",
                "sources": [spec for _, spec in _TURNS[language]],
            },
        },
        "messages": messages,
    }


def write_demo_trajectory(language: str, path: Path) -> Path:
    """Write :func:`demo_trajectory` to ``path`` (parents created); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(demo_trajectory(language), indent=2) + "\n", encoding="utf-8")
    return path
