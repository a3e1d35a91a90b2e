"""The attention families of the PTXBench problem lists: definitions and their PyTorch references.

Three families, each with head_dim in {64, 96, 128, 256} (backward: {64, 96, 128}) and a causal twin; names,
seq_lens and workload uuids are the public ones of ``mha_problems.csv``, ``mha_bwd_problems.csv``,
``fp8_mha_problems.csv`` and ``h100_reference_latency.csv``:

* ``mha_with_lse_d{D}[_causal]`` (op_type ``mha``): bf16 q, k, v -> bf16 o and fp32 natural-log LSE;
* ``mha_bwd_d{D}[_causal]`` (op_type ``mha_bwd``): bf16 q, k, v, o, do and fp32 lse -> bf16 dq, dk, dv;
* ``fp8_mha_with_lse_d{D}[_causal]`` (op_type ``fp8_mha``): float8_e4m3fn q, k, v with fp32 per-(batch, head)
  scales -> bf16 o and fp32 LSE.

batch_size=4 and num_heads=48 for every family: with the usual FLOP counts (forward ``4*B*H*S^2*D``,
backward 2.5 times that, causal half) they reproduce the TFLOP/s and latencies of
``h100_reference_latency.csv`` to within 4% for all 132 rows (192 = 4 * 48 heads of attention).

The references are exact (fp32 scores and accumulation, no TF32: PyTorch's default) and memory-bounded: rows
are processed in blocks so that one fp32 score block stays under 1 GiB (512 MiB in the backward, which holds
four), whatever the seq_len. All three share one forward (``ATTENTION_FORWARD``), so the backward's inputs
``o`` and ``lse`` come from exactly the function the forward definitions use (see ``derive_inputs`` in
:data:`BACKWARD_REFERENCE` and :mod:`fibserve.bench.data.derived`).
"""

from __future__ import annotations

from fibserve.trace import AxisConst, AxisVar, Definition, TensorSpec

BATCH_SIZE = 4
NUM_HEADS = 48
FORWARD_HEAD_DIMS = (64, 96, 128, 256)
BACKWARD_HEAD_DIMS = (64, 96, 128)

ATTENTION_FORWARD = '''import math

import torch


def attention_forward(q, k, v, causal, scales=None):
    """Exact attention: o [B, H, Sq, Dv] fp32 and the natural-log LSE [B, H, Sq] fp32 of q [B, H, Sq, D],
    k [B, H, Skv, D], v [B, H, Skv, Dv] (any float dtype; read in fp32, times scales[i][b, h] when scales
    are given). scores = q @ k^T / sqrt(D). With causal, query i sees key j when j <= i + Skv - Sq (bottom-right
    aligned; j <= i when Sq == Skv); a query that sees no key gets lse = -inf and o = 0."""
    batch, heads, seq_q, dim = q.shape
    seq_kv = k.shape[2]
    scale = 1.0 / math.sqrt(dim)
    o = torch.empty((batch, heads, seq_q, v.shape[-1]), dtype=torch.float32, device=q.device)
    lse = torch.empty((batch, heads, seq_q), dtype=torch.float32, device=q.device)
    block = max(1, min(seq_q, (1 << 28) // max(1, heads * seq_kv)))
    for b in range(batch):
        queries, keys, values = (_fp32(x, scales, i, b) for i, x in enumerate((q, k, v)))
        for start in range(0, seq_q, block):
            stop = min(seq_q, start + block)
            scores = torch.matmul(queries[:, start:stop], keys.transpose(-1, -2)).mul_(scale)
            if causal:
                _mask_(scores, start, stop, seq_q, seq_kv)
            row_lse = torch.logsumexp(scores, dim=-1)
            probs = scores.sub_(_finite(row_lse)[..., None]).exp_()
            o[b, :, start:stop] = torch.matmul(probs, values)
            lse[b, :, start:stop] = row_lse
    return o, lse


def _fp32(x, scales, i, b):
    """x[b] in fp32, dequantized by scales[i][b] (one scale per head) when scales are given."""
    out = x[b].float()
    return out if scales is None else out.mul_(scales[i][b].float()[:, None, None])


def _mask_(scores, start, stop, seq_q, seq_kv):
    """Set scores[:, i - start, j] to -inf where key j is after query i (bottom-right aligned)."""
    rows = torch.arange(start, stop, device=scores.device)[:, None] + (seq_kv - seq_q)
    cols = torch.arange(seq_kv, device=scores.device)[None, :]
    scores.masked_fill_(cols > rows, float("-inf"))


def _finite(row_lse):
    """The LSE with -inf (a row that sees no key) replaced by 0, so exp(scores - it) is 0 there, not NaN."""
    return torch.where(torch.isinf(row_lse), torch.zeros_like(row_lse), row_lse)
'''

FORWARD_REFERENCE = (
    ATTENTION_FORWARD
    + '''

CAUSAL = {causal}


def run(q, k, v):
    """Attention forward with LSE: q, k, v [B, H, S, D] bf16 -> o [B, H, S, D] bf16 and lse [B, H, S] fp32,
    lse[b, h, i] = logsumexp_j(q[b, h, i] . k[b, h, j] / sqrt(D)) in natural log; o = softmax(scores) @ v."""
    o, lse = attention_forward(q, k, v, CAUSAL)
    return o.to(q.dtype), lse
'''
)

FP8_REFERENCE = (
    ATTENTION_FORWARD
    + '''

CAUSAL = {causal}


def run(q, k, v, q_scale, k_scale, v_scale):
    """FP8 attention forward with LSE: q, k, v [B, H, S, D] float8_e4m3fn with fp32 scales [B, H]; the real
    value of x[b, h, s, d] is x[b, h, s, d] * x_scale[b, h]. Dequantized exactly in fp32, then the same
    attention as mha_with_lse: o [B, H, S, D] bf16, lse [B, H, S] fp32 natural log."""
    o, lse = attention_forward(q, k, v, CAUSAL, scales=(q_scale, k_scale, v_scale))
    return o.to(torch.bfloat16), lse
'''
)

BACKWARD_REFERENCE = (
    ATTENTION_FORWARD
    + '''

CAUSAL = {causal}


def derive_inputs(q, k, v):
    """o and lse are the forward of q, k, v (a backward is only defined at its own forward): the harness
    draws q, k, v and do, then takes o and lse from here."""
    o, lse = attention_forward(q, k, v, CAUSAL)
    return {{"o": o.to(q.dtype), "lse": lse}}


def run(q, k, v, o, lse, do):
    """Attention backward (the FlashAttention-2 formulation): given the forward's o and lse and the output
    gradient do, P = exp(q k^T / sqrt(D) - lse), dv = P^T do, dP = do v^T, delta = rowsum(do * o),
    dS = P * (dP - delta), dq = dS k / sqrt(D), dk = dS^T q / sqrt(D). All bf16 except lse (fp32)."""
    batch, heads, seq_q, dim = q.shape
    seq_kv = k.shape[2]
    scale = 1.0 / math.sqrt(dim)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    block = max(1, min(seq_q, (1 << 27) // max(1, heads * seq_kv)))
    for b in range(batch):
        keys, values = k[b].float(), v[b].float()
        dk_sum, dv_sum = torch.zeros_like(keys), torch.zeros_like(values)
        delta = (do[b].float() * o[b].float()).sum(dim=-1)
        for start in range(0, seq_q, block):
            stop = min(seq_q, start + block)
            queries, grad = q[b, :, start:stop].float(), do[b, :, start:stop].float()
            scores = torch.matmul(queries, keys.transpose(-1, -2)).mul_(scale)
            if CAUSAL:
                _mask_(scores, start, stop, seq_q, seq_kv)
            probs = scores.sub_(_finite(lse[b, :, start:stop].float())[..., None]).exp_()
            dv_sum += torch.matmul(probs.transpose(-1, -2), grad)
            ds = probs.mul_(torch.matmul(grad, values.transpose(-1, -2)).sub_(delta[:, start:stop, None]))
            dq[b, :, start:stop] = torch.matmul(ds, keys).mul_(scale).to(q.dtype)
            dk_sum += torch.matmul(ds.transpose(-1, -2), queries).mul_(scale)
        dk[b], dv[b] = dk_sum.to(k.dtype), dv_sum.to(v.dtype)
    return dq, dk, dv
'''
)


def _t(shape: list[str] | None, dtype: str, description: str | None = None) -> TensorSpec:
    return TensorSpec(shape=shape, dtype=dtype, description=description)  # type: ignore[arg-type]


QKV = ["batch_size", "num_heads", "seq_len", "head_dim"]
ROWS = ["batch_size", "num_heads", "seq_len"]
HEADS = ["batch_size", "num_heads"]
SHAPES_NOTE = (
    "batch_size=4 and num_heads=48 are the PTXBench problem sizes: with {flops} FLOPs they agree within 4% "
    "with the TFLOP/s and latencies of h100_reference_latency.csv. seq_len values and workload uuids come "
    "from that file and from {csv} (seq_len in {seq_lens})."
)
MASK_NOTE = {
    True: "causal (query i attends to keys j <= i)",
    False: "non-causal",
}


def _axes(head_dim: int) -> dict:
    return {
        "batch_size": AxisConst(value=BATCH_SIZE),
        "num_heads": AxisConst(value=NUM_HEADS),
        "seq_len": AxisVar(description="Query and key/value sequence length (equal)."),
        "head_dim": AxisConst(value=head_dim),
    }


def _tags(suite: str, causal: bool, head_dim: int) -> list[str]:
    tags = [f"suite:{suite}", "source:ptxbench-problems", f"head_dim:{head_dim}"]
    return tags + (["causal"] if causal else [])


def _definition(
    family: str, op_type: str, head_dim: int, causal: bool, description: str, tensors: tuple, reference: str
) -> Definition:
    """One attention definition: ``{family}_d{head_dim}[_causal]`` with the suite's axes and tags;
    ``tensors`` is (inputs, outputs) as name -> TensorSpec."""
    inputs, outputs = tensors
    return Definition(
        name=f"{family}_d{head_dim}" + ("_causal" if causal else ""),
        op_type=op_type,
        description=description,
        tags=_tags(f"ptxbench-{family.replace('_', '-')}", causal, head_dim),
        axes=_axes(head_dim),
        inputs=inputs,
        outputs=outputs,
        reference=reference.format(causal=causal),
    )


def forward_definition(head_dim: int, causal: bool, seq_lens: list[int]) -> Definition:
    """``mha_with_lse_d{head_dim}[_causal]``: attention forward with LSE in bf16, var seq_len."""
    flops = "2*B*H*S^2*D (half of the non-causal count)" if causal else "4*B*H*S^2*D"
    description = (
        f"Multi-head attention forward, {MASK_NOTE[causal]}, returning the output and the natural-log "
        f"log-sum-exp of each score row. Softmax scale is the constant 1/sqrt(head_dim) = 1/sqrt({head_dim}). "
        "Layout [batch, heads, seq, dim]. "
        + SHAPES_NOTE.format(flops=flops, csv="mha_problems.csv", seq_lens=sorted(seq_lens))
    )
    inputs = {n: _t(QKV, "bfloat16", w) for n, w in (("q", "Queries."), ("k", "Keys."), ("v", "Values."))}
    outputs = {
        "o": _t(QKV, "bfloat16", "Attention output."),
        "lse": _t(ROWS, "float32", "Natural-log logsumexp of the scaled scores of each query."),
    }
    return _definition(
        "mha_with_lse", "mha", head_dim, causal, description, (inputs, outputs), FORWARD_REFERENCE
    )


def backward_definition(head_dim: int, causal: bool, seq_lens: list[int]) -> Definition:
    """``mha_bwd_d{head_dim}[_causal]``: the attention backward in bf16 given o, lse and do, var seq_len."""
    flops = "5*B*H*S^2*D (half of the non-causal count)" if causal else "10*B*H*S^2*D (2.5x the forward)"
    description = (
        f"Multi-head attention backward, {MASK_NOTE[causal]}, softmax scale 1/sqrt({head_dim}), layout "
        "[batch, heads, seq, dim]: from q, k, v, the forward's output o and natural-log LSE lse, and the "
        "output gradient do, compute dq, dk, dv (FlashAttention-2 formulation: P is recomputed from lse, "
        "delta = rowsum(do * o)). o and lse are always the true forward of q, k, v (the harness derives "
        "them; do is random). "
        + SHAPES_NOTE.format(flops=flops, csv="mha_bwd_problems.csv", seq_lens=sorted(seq_lens))
    )
    inputs = {
        "q": _t(QKV, "bfloat16", "Queries."),
        "k": _t(QKV, "bfloat16", "Keys."),
        "v": _t(QKV, "bfloat16", "Values."),
        "o": _t(QKV, "bfloat16", "Forward output for q, k, v."),
        "lse": _t(ROWS, "float32", "Forward natural-log logsumexp for q, k, v."),
        "do": _t(QKV, "bfloat16", "Gradient of the loss with respect to o."),
    }
    outputs = {f"d{n}": _t(QKV, "bfloat16", f"Gradient with respect to {n}.") for n in ("q", "k", "v")}
    return _definition(
        "mha_bwd", "mha_bwd", head_dim, causal, description, (inputs, outputs), BACKWARD_REFERENCE
    )


def fp8_definition(head_dim: int, causal: bool, seq_lens: list[int]) -> Definition:
    """``fp8_mha_with_lse_d{head_dim}[_causal]``: FP8 (e4m3) attention forward with per-head scales."""
    flops = "2*B*H*S^2*D (half of the non-causal count)" if causal else "4*B*H*S^2*D"
    scale = "Dequantization scale per (batch, head): real value = fp8 value * scale."
    description = (
        f"FP8 multi-head attention forward, {MASK_NOTE[causal]}, with LSE: q, k, v in float8_e4m3fn, each "
        "with an fp32 dequantization scale per (batch, head) (q_scale etc. [batch, heads]; the real value is "
        "fp8 value * scale). Per head rather than per tensor: it is the layout of FlashAttention-3's FP8 "
        "descale tensors, one head's outliers do not cost the others their precision, and a kernel applies "
        "it once per tile (scores times q_scale*k_scale, output times v_scale). The softmax scale "
        f"1/sqrt({head_dim}) is separate. Output o in bf16, lse the natural-log logsumexp in fp32. Inputs "
        "are bf16 standard normals quantized with scale = amax / 448 per (batch, head). "
        + SHAPES_NOTE.format(flops=flops, csv="fp8_mha_problems.csv", seq_lens=sorted(seq_lens))
    )
    inputs = {
        n: _t(QKV, "float8_e4m3fn", f"{w} (e4m3).")
        for n, w in (("q", "Queries"), ("k", "Keys"), ("v", "Values"))
    }
    inputs |= {f"{n}_scale": _t(HEADS, "float32", scale) for n in ("q", "k", "v")}
    outputs = {
        "o": _t(QKV, "bfloat16", "Attention output."),
        "lse": _t(ROWS, "float32", "Natural-log logsumexp of the scaled, dequantized scores."),
    }
    return _definition(
        "fp8_mha_with_lse", "fp8_mha", head_dim, causal, description, (inputs, outputs), FP8_REFERENCE
    )


FAMILIES = (
    ("mha_with_lse_d{d}", FORWARD_HEAD_DIMS, forward_definition, "mha"),
    ("mha_bwd_d{d}", BACKWARD_HEAD_DIMS, backward_definition, "mha_bwd"),
    ("fp8_mha_with_lse_d{d}", FORWARD_HEAD_DIMS, fp8_definition, "fp8_mha"),
)
"""(name pattern, head dims, definition builder, folder under definitions/) of each attention family."""


def attention_definitions(
    seq_lens: dict[str, dict[int, str]],
) -> list[tuple[str, Definition, dict[int, str]]]:
    """Every attention definition with its folder and workloads (seq_len -> public uuid), from the problem
    lists' rows.

    Args:
        seq_lens: definition name -> seq_len -> workload uuid (from the problem CSVs).

    Raises:
        KeyError: a definition of the suite has no rows in the CSVs (the lists changed).
    """
    out = []
    for pattern, dims, build, folder in FAMILIES:
        for head_dim in dims:
            for causal in (False, True):
                name = pattern.format(d=head_dim) + ("_causal" if causal else "")
                rows = seq_lens[name]
                out.append((folder, build(head_dim, causal, sorted(rows)), dict(sorted(rows.items()))))
    return out
