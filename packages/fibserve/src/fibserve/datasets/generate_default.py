"""Write the bundled default trace set from the PTXBench problem lists.

Run from the repository root (the problem CSVs are public facts: names, shapes and workload uuids)::

    uv run python -m fibserve.datasets.generate_default --problems ../shared/data/ptxbench-problems

The output (``default/definitions``, ``default/workloads`` and the baseline Solutions under
``default/solutions``) is committed; this script only makes it reproducible. Every reference and baseline is
PTXBench's own PyTorch code (the attention families in :mod:`fibserve.datasets.attention`, the inference ops
in :mod:`fibserve.datasets.inference_suite`, the baselines in :mod:`fibserve.datasets.baselines` and
:mod:`fibserve.datasets.inference_baselines`).
"""

from __future__ import annotations

import argparse
import csv
import re
import uuid
from collections import defaultdict
from pathlib import Path

from fibserve.trace import (
    AxisConst,
    AxisVar,
    Definition,
    RandomInput,
    ScalarInput,
    TensorSpec,
    Trace,
    Workload,
)

from .attention import attention_definitions
from .baselines import baseline_for, with_baseline_tag
from .inference_baselines import inference_baseline
from .inference_suite import inference_definitions

OUR_WORKLOAD_NAMESPACE = uuid.UUID("8b0a4f7e-6d0c-4d5e-9a57-0c2f3e1d6b21")
"""Namespace of the uuid5 of workloads PTXBench defines itself (not from a public list)."""

GEMM_REFERENCE = '''import torch


def run(A, B):
    """C = A @ B.T: A [M, K], B [N, K] (row-major weight), C [M, N], all in the definition's 16-bit dtype."""
    return torch.matmul(A, B.t())
'''

VECTOR_ADD_REFERENCE = '''import torch


def run(x, y):
    """z = x + y elementwise; x, y, z: [N] float32."""
    return x + y
'''

SOFTMAX_REFERENCE = '''import torch


def run(x):
    """Row softmax: y[m, :] = exp(x[m, :] - max) / sum(exp(x[m, :] - max)); x, y: [M, N] float32."""
    return torch.softmax(x, dim=-1)
'''

RMSNORM_REFERENCE = '''import torch


def run(x, weight, eps):
    """RMSNorm: y = x / sqrt(mean(x^2, last dim) + eps) * weight; x, y: [M, H] float32, weight [H] float32."""
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x * rms * weight
'''

GEMM_ORIGINS = {
    "gemm_n7168_k5120": "Qwen3 14B qkv_proj: (40 query + 8 key + 8 value heads) x 128 = 7168 outputs, hidden size 5120",
    "gemm_n4096_k4096": "Llama 3.1 8B attention output projection (o_proj)",
    "gemm_n6144_k4096": "Llama 3.1 8B fused qkv projection",
    "gemm_n28672_k4096": "Llama 3.1 8B fused MLP gate/up projection",
    "gemm_n4096_k14336": "Llama 3.1 8B MLP down projection",
}
"""Where a shape comes from, for the description (facts from the public FlashInfer Trace data)."""

PUBLIC_FLOAT16_GEMMS = frozenset(
    {
        "gemm_n128_k2048",
        "gemm_n256_k7168",
        "gemm_n2048_k4096",
        "gemm_n4096_k4096",
        "gemm_n4096_k14336",
        "gemm_n5120_k2048",
        "gemm_n6144_k4096",
        "gemm_n28672_k4096",
    }
)
"""GEMM names that public FlashInfer Trace data defines in float16; we keep that dtype so a workload uuid means
the same problem here and there. The other shapes (PTXBench's own, like gemm_n7168_k5120) are bfloat16."""


def _t(shape: list[str] | None, dtype: str, description: str | None = None) -> TensorSpec:
    return TensorSpec(shape=shape, dtype=dtype, description=description)  # type: ignore[arg-type]


def gemm_definition(name: str, n: int, k: int, m_values: list[int]) -> Definition:
    """A ``C = A @ B.T`` definition with const N, K and var M (shape facts from the PTXBench GEMM list).

    float16 for the names public FlashInfer Trace data defines in float16, bfloat16 otherwise.
    """
    origin = GEMM_ORIGINS.get(name)
    source = f" The shape is {origin}." if origin else ""
    public = name in PUBLIC_FLOAT16_GEMMS
    dtype = "float16" if public else "bfloat16"
    why_dtype = (
        " float16, as in the public FlashInfer Trace definition of the same name."
        if public
        else " bfloat16, as in the PTXBench definition gemm_n7168_k5120."
    )
    return Definition(
        name=name,
        op_type="gemm",
        description=(
            f"General matrix multiply C = A @ B.T with N={n}, K={k} and a variable token count M; dtype"
            f"{why_dtype}{source} Shapes and workload uuids come from the PTXBench GEMM problem list (gemm_problems.csv; "
            f"M in {sorted(m_values)})."
        ),
        tags=["suite:ptxbench-gemm", "source:ptxbench-problems"],
        axes={
            "M": AxisVar(description="Number of rows of A and C (tokens)."),
            "N": AxisConst(value=n, description="Number of rows of B and columns of C (output features)."),
            "K": AxisConst(value=k, description="Reduction dimension (input features)."),
        },
        inputs={
            "A": _t(["M", "K"], dtype, "Activations."),
            "B": _t(["N", "K"], dtype, "Weight, row-major [N, K]."),
        },
        outputs={"C": _t(["M", "N"], dtype, "A @ B.T.")},
        reference=GEMM_REFERENCE,
    )


def small_definitions() -> list[tuple[Definition, list[dict[str, int]], dict[str, ScalarInput]]]:
    """Float32 definitions small enough for the Triton CPU interpreter, with their workload axes."""
    why = "Shapes chosen by PTXBench to be small enough for the Triton CPU interpreter in CI (float32 only)."
    vector_add = Definition(
        name="vector_add_f32",
        op_type="elementwise",
        description=f"Elementwise z = x + y over a float32 vector of length N. {why}",
        tags=["suite:ptxbench-ci", "dtype:float32"],
        axes={"N": AxisVar(description="Vector length.")},
        inputs={"x": _t(["N"], "float32"), "y": _t(["N"], "float32")},
        outputs={"z": _t(["N"], "float32")},
        reference=VECTOR_ADD_REFERENCE,
    )
    softmax = Definition(
        name="softmax_rows_f32",
        op_type="softmax",
        description=f"Softmax over the last dimension of a float32 [M, N] matrix, N=1024. {why}",
        tags=["suite:ptxbench-ci", "dtype:float32"],
        axes={
            "M": AxisVar(description="Number of rows."),
            "N": AxisConst(value=1024, description="Row length."),
        },
        inputs={"x": _t(["M", "N"], "float32")},
        outputs={"y": _t(["M", "N"], "float32")},
        reference=SOFTMAX_REFERENCE,
    )
    rmsnorm = Definition(
        name="rmsnorm_f32",
        op_type="rmsnorm",
        description=f"RMSNorm over rows of a float32 [M, H] matrix, H=512, eps given as a scalar (1e-6). {why}",
        tags=["suite:ptxbench-ci", "dtype:float32"],
        axes={
            "M": AxisVar(description="Number of rows (tokens)."),
            "H": AxisConst(value=512, description="Hidden size."),
        },
        inputs={"x": _t(["M", "H"], "float32"), "weight": _t(["H"], "float32"), "eps": _t(None, "float32")},
        outputs={"y": _t(["M", "H"], "float32")},
        reference=RMSNORM_REFERENCE,
    )
    return [
        (vector_add, [{"N": 1024}, {"N": 65536}, {"N": 1000}], {}),
        (softmax, [{"M": 1}, {"M": 64}, {"M": 333}], {}),
        (rmsnorm, [{"M": 1}, {"M": 17}, {"M": 128}], {"eps": ScalarInput(value=1e-6)}),
    ]


def our_workload_uuid(definition: str, axes: dict[str, int]) -> str:
    """Deterministic uuid5 for a workload PTXBench defines itself."""
    key = definition + ":" + ",".join(f"{k}={v}" for k, v in sorted(axes.items()))
    return str(uuid.uuid5(OUR_WORKLOAD_NAMESPACE, key))


def _workload_line(
    definition: Definition, uuid_: str, axes: dict[str, int], scalars: dict | None = None
) -> str:
    given = {
        name: v if isinstance(v, ScalarInput) else ScalarInput(value=v) for name, v in (scalars or {}).items()
    }
    inputs = {name: given.get(name, RandomInput()) for name in definition.inputs}
    trace = Trace(definition=definition.name, workload=Workload(uuid=uuid_, axes=axes, inputs=inputs))
    return trace.model_dump_json()


def _attention_rows(problems: Path) -> dict[str, dict[int, str]]:
    """Definition name -> seq_len -> workload uuid over the attention problem lists (the first uuid wins)."""
    rows: dict[str, dict[int, str]] = defaultdict(dict)
    for file in ("mha_problems.csv", "mha_bwd_problems.csv", "h100_reference_latency.csv"):
        with (problems / file).open() as fh:
            for row in csv.DictReader(fh):
                rows[row["definition_name"]].setdefault(int(row["seq_len"]), row["workload_uuid"])
    return rows


def write_default(problems: Path, out: Path) -> list[Path]:
    """Write definitions, workloads and baseline Solutions under ``out``; returns the written files."""
    written: list[Path] = []

    def emit(subdir: str, definition: Definition, lines: list[str]) -> None:
        baseline = inference_baseline(definition) or baseline_for(definition)
        definition = with_baseline_tag(definition, baseline)
        dpath = out / "definitions" / subdir / f"{definition.name}.json"
        wpath = out / "workloads" / subdir / f"{definition.name}.jsonl"
        spath = out / "solutions" / subdir / definition.name / f"{baseline.name}.json"
        for path, text in (
            (dpath, definition.model_dump_json(indent=2) + "\n"),
            (wpath, "".join(line + "\n" for line in lines)),
            (spath, baseline.model_dump_json(indent=2) + "\n"),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)

    gemm_rows: dict[str, list[tuple[str, int]]] = defaultdict(list)
    with (problems / "gemm_problems.csv").open() as fh:
        for row in csv.DictReader(fh):
            gemm_rows[row["definition_name"]].append((row["workload_uuid"], int(row["M"])))
    for name, rows in sorted(gemm_rows.items()):
        match = re.fullmatch(r"gemm_n(\d+)_k(\d+)", name)
        assert match, name
        definition = gemm_definition(name, int(match[1]), int(match[2]), [m for _, m in rows])
        emit("gemm", definition, [_workload_line(definition, u, {"M": m}) for u, m in rows])

    for folder, definition, workloads in attention_definitions(_attention_rows(problems)):
        lines = [_workload_line(definition, u, {"seq_len": s}) for s, u in workloads.items()]
        emit(folder, definition, lines)

    for folder, definition, workloads in inference_definitions(problems, our_workload_uuid):
        emit(folder, definition, [_workload_line(definition, u, a, scalars) for u, a, scalars in workloads])

    for definition, axes_list, scalars in small_definitions():
        lines = [
            _workload_line(definition, our_workload_uuid(definition.name, a), a, scalars) for a in axes_list
        ]
        emit("ci", definition, lines)
    return written


def main() -> None:
    """Command-line entry: ``--problems DIR`` (PTXBench problem CSVs), ``--out DIR`` (default: bundled set)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, required=True, help="folder with gemm_problems.csv etc.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "default")
    args = parser.parse_args()
    files = write_default(args.problems, args.out)
    print(f"wrote {len(files)} files under {args.out}")


if __name__ == "__main__":
    main()
