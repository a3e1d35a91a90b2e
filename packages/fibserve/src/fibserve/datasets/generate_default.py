"""Write the bundled default trace set from the PTXBench problem lists.

Run from the repository root (the problem CSVs are public facts: names, shapes and workload uuids)::

    uv run python -m fibserve.datasets.generate_default --problems ../shared/data/ptxbench-problems

The output (``default/definitions`` and ``default/workloads``) is committed; this script only makes it
reproducible. Every reference below is PTXBench's own PyTorch code.
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

OUR_WORKLOAD_NAMESPACE = uuid.UUID("8b0a4f7e-6d0c-4d5e-9a57-0c2f3e1d6b21")
"""Namespace of the uuid5 of workloads PTXBench defines itself (not from a public list)."""

GEMM_REFERENCE = '''import torch


def run(A, B):
    """C = A @ B.T: A [M, K], B [N, K] (row-major weight), C [M, N], all in the definition's 16-bit dtype."""
    return torch.matmul(A, B.t())
'''

MHA_REFERENCE = '''import math

import torch

CAUSAL = {causal}


def run(q, k, v):
    """Attention forward with log-sum-exp.

    q, k, v: [B, H, S, D] bf16. Returns o [B, H, S, D] bf16 and lse [B, H, S] fp32, where
    scores = (q @ k^T) / sqrt(D) in fp32, lse = natural-log logsumexp of each score row and
    o = softmax(scores) @ v. With CAUSAL, query i sees keys j <= i. Rows are processed in blocks so that
    the fp32 score matrix never exceeds about 2 GiB.
    """
    batch, heads, seq, dim = q.shape
    scale = 1.0 / math.sqrt(dim)
    o = torch.empty_like(q)
    lse = torch.empty((batch, heads, seq), dtype=torch.float32, device=q.device)
    block = max(1, min(seq, (1 << 29) // max(1, heads * seq)))
    keys = k.float()
    values = v.float()
    for b in range(batch):
        for start in range(0, seq, block):
            stop = min(seq, start + block)
            scores = torch.matmul(q[b, :, start:stop].float(), keys[b].transpose(-1, -2)) * scale
            if CAUSAL:
                rows = torch.arange(start, stop, device=q.device)[:, None]
                cols = torch.arange(seq, device=q.device)[None, :]
                scores = scores.masked_fill(cols > rows, float("-inf"))
            row_lse = torch.logsumexp(scores, dim=-1)
            probs = torch.exp(scores - row_lse[..., None])
            o[b, :, start:stop] = torch.matmul(probs, values[b]).to(q.dtype)
            lse[b, :, start:stop] = row_lse
    return o, lse
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


def mha_definition(name: str, causal: bool, seq_lens: list[int]) -> Definition:
    """Attention forward with LSE, B=4, H=48, D=128 (the PTXBench mha_with_lse problems), var seq_len."""
    mask = "causal (query i attends to keys j <= i)" if causal else "non-causal"
    flops = "2*B*H*S^2*D (half of the non-causal count)" if causal else "4*B*H*S^2*D"
    return Definition(
        name=name,
        op_type="mha",
        description=(
            f"Multi-head attention forward, {mask}, returning the output and the natural-log log-sum-exp of each "
            "score row. Softmax scale is the constant 1/sqrt(head_dim) = 1/sqrt(128). Layout [batch, heads, seq, dim]. "
            f"batch_size=4 and num_heads=48 are the PTXBench problem sizes; with {flops} FLOPs they agree "
            "within 2% with the TFLOPS and latencies of h100_reference_latency.csv. seq_len values and workload uuids come from that file and from "
            f"mha_problems.csv (seq_len in {sorted(seq_lens)})."
        ),
        tags=["suite:ptxbench-mha-with-lse", "source:ptxbench-problems"] + (["causal"] if causal else []),
        axes={
            "batch_size": AxisConst(value=4),
            "num_heads": AxisConst(value=48),
            "seq_len": AxisVar(description="Query and key/value sequence length (equal)."),
            "head_dim": AxisConst(value=128),
        },
        inputs={
            name_: _t(["batch_size", "num_heads", "seq_len", "head_dim"], "bfloat16", what)
            for name_, what in (("q", "Queries."), ("k", "Keys."), ("v", "Values."))
        },
        outputs={
            "o": _t(["batch_size", "num_heads", "seq_len", "head_dim"], "bfloat16", "Attention output."),
            "lse": _t(
                ["batch_size", "num_heads", "seq_len"], "float32", "Natural-log logsumexp of scaled scores."
            ),
        },
        reference=MHA_REFERENCE.format(causal=causal),
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
    inputs = {name: (scalars or {}).get(name, RandomInput()) for name in definition.inputs}
    trace = Trace(definition=definition.name, workload=Workload(uuid=uuid_, axes=axes, inputs=inputs))
    return trace.model_dump_json()


def write_default(problems: Path, out: Path) -> list[Path]:
    """Write definitions and workloads under ``out``; returns the written files."""
    written: list[Path] = []

    def emit(subdir: str, definition: Definition, lines: list[str]) -> None:
        dpath = out / "definitions" / subdir / f"{definition.name}.json"
        wpath = out / "workloads" / subdir / f"{definition.name}.jsonl"
        dpath.parent.mkdir(parents=True, exist_ok=True)
        wpath.parent.mkdir(parents=True, exist_ok=True)
        dpath.write_text(definition.model_dump_json(indent=2) + "\n")
        wpath.write_text("".join(line + "\n" for line in lines))
        written.extend([dpath, wpath])

    gemm_rows: dict[str, list[tuple[str, int]]] = defaultdict(list)
    with (problems / "gemm_problems.csv").open() as fh:
        for row in csv.DictReader(fh):
            gemm_rows[row["definition_name"]].append((row["workload_uuid"], int(row["M"])))
    for name, rows in sorted(gemm_rows.items()):
        match = re.fullmatch(r"gemm_n(\d+)_k(\d+)", name)
        assert match, name
        definition = gemm_definition(name, int(match[1]), int(match[2]), [m for _, m in rows])
        emit("gemm", definition, [_workload_line(definition, u, {"M": m}) for u, m in rows])

    mha_rows: dict[str, dict[int, str]] = defaultdict(dict)
    for file in ("mha_problems.csv", "h100_reference_latency.csv"):
        with (problems / file).open() as fh:
            for row in csv.DictReader(fh):
                mha_rows[row["definition_name"]].setdefault(int(row["seq_len"]), row["workload_uuid"])
    for name in ("mha_with_lse_d128", "mha_with_lse_d128_causal"):
        rows = sorted(mha_rows[name].items())
        definition = mha_definition(name, name.endswith("_causal"), [s for s, _ in rows])
        emit("mha", definition, [_workload_line(definition, u, {"seq_len": s}) for s, u in rows])

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
