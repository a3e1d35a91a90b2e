"""Gated delta net definitions of the PTXBench problem list (``gdn_problems.csv``; FlashInfer-Bench op type
``gdn``): decode, multi-token (MTP) and prefill, ``qk{4,8}_v{8,16}_d128_k_last``.

Shapes of Qwen3-Next's linear-attention layers at tensor parallelism 4 (``qk4_v8``: 4 query/key heads, 8
value heads) and 2 (``qk8_v16``), head size 128, the recurrent state in the k-last layout ``[.., HV, V, K]``
(K contiguous). Per value head ``h`` (query/key head ``h // (HV / H)``) and token::

    g    = exp(-exp(A_log[h]) * softplus(a[h] + dt_bias[h]))      decay, in (0, 1)
    beta = sigmoid(b[h])                                           update gate, in (0, 1)
    S    = g * S;   S += beta * (v - S k) k^T                      delta rule, S [V, K]
    o    = scale * S q

The decode and prefill definitions keep the input names, shapes and meanings of the public FlashInfer-Trace
definitions of the same names (``gdn_decode_qk4_v8_d128_k_last``: ``run(q, k, v, state, A_log, a, dt_bias, b,
scale)``; ``gdn_prefill_...``: ``run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)``), whose
references take q and k as given (already L2-normalised by the model; the input generator makes them unit
vectors, :mod:`fibserve.bench.data.gdn`). The public ``state`` is marked optional there; here it is always
given (a state of zeros is one workload of many, not a separate contract).

MTP (``gdn_mtp_...``, speculative verification) takes the public input names (``initial_state`` [pool_size,
HV, V, K], ``initial_state_indices`` [B]) but defines its second output as the batch's states after its
``seq_len`` tokens, ``final_state`` [B, HV, V, K]: a public port of this definition returns the pool
unchanged (FlashInfer's ``disable_state_update``), an output that a copy satisfies and that measures a
pool-sized memcpy instead of the recurrence. A solution written for that contract gets INCORRECT_SHAPE here.

The reference steps the recurrence token by token in fp32 (the definition, no chunked reformulation), all
sequences of a batch at once; memory is the states, the fp32 copies of q, k, v and one step's temporaries.
"""

from __future__ import annotations

from fibserve.trace import AxisConst, AxisVar, Definition, TensorSpec

HEAD_SIZE = 128
CONFIGS = ((4, 8), (8, 16))
"""(query/key heads, value heads) of the problem list: Qwen3-Next at TP=4 and TP=2."""

GDN_CORE = '''import math

import torch
import torch.nn.functional as F


def gates(A_log, a, dt_bias, b):
    """g = exp(-exp(A_log) * softplus(a + dt_bias)) and beta = sigmoid(b), fp32, shaped like a and b."""
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    return g, torch.sigmoid(b.float())


def step(state, q, k, v, g, beta, scale):
    """One token of every row: state [R, HV, V, K], q and k [R, HV, K] (expanded to the value heads), v
    [R, HV, V], g and beta [R, HV], all fp32. Returns (o [R, HV, V], the new state)."""
    state = state * g[..., None, None]
    predicted = torch.einsum("rhvk,rhk->rhv", state, k)
    state = state + torch.einsum("rhv,rhk->rhvk", beta[..., None] * (v - predicted), k)
    return scale * torch.einsum("rhvk,rhk->rhv", state, q), state


def widen(x, value_heads):
    """x [..., H, K] to fp32 [..., HV, K]: value head h reads head h // (HV / H)."""
    return x.float().repeat_interleave(value_heads // x.shape[-2], dim=-2)


def scale_of(scale, head_size):
    return 1.0 / math.sqrt(head_size) if scale is None or float(scale) == 0.0 else float(scale)
'''
"""Gates and one step of the delta rule, shared by the three references."""

_DECODE_RUN = '''

def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    """One token per sequence: q, k [B, 1, H, K], v [B, 1, HV, V], state [B, HV, V, K] (k-last)."""
    value_heads = v.shape[2]
    g, beta = gates(A_log, a, dt_bias, b)
    o, new_state = step(
        state.float(), widen(q[:, 0], value_heads), widen(k[:, 0], value_heads), v[:, 0].float(),
        g[:, 0], beta[:, 0], scale_of(scale, q.shape[-1]),
    )
    return o[:, None].to(torch.bfloat16), new_state
'''

_MTP_RUN = '''

def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale):
    """seq_len tokens per sequence from the pooled state: row i starts from initial_state[initial_state_indices[i]];
    outputs [B, T, HV, V] and the rows' states after their T tokens [B, HV, V, K]."""
    batch, tokens, _, _ = q.shape
    value_heads = v.shape[2]
    g, beta = gates(A_log, a, dt_bias, b)
    qs, ks, s = widen(q, value_heads), widen(k, value_heads), scale_of(scale, q.shape[-1])
    state = initial_state[initial_state_indices.long()].float()
    output = torch.empty((batch, tokens, value_heads, v.shape[-1]), dtype=torch.bfloat16, device=q.device)
    for t in range(tokens):
        o, state = step(state, qs[:, t], ks[:, t], v[:, t].float(), g[:, t], beta[:, t], s)
        output[:, t] = o.to(torch.bfloat16)
    return output, state
'''

_PREFILL_RUN = '''

def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """Variable-length prefill: sequence i is rows cu_seqlens[i]:cu_seqlens[i + 1] of q, k, v [T, H, K],
    starting from state[i] [HV, V, K]; outputs [T, HV, V] and every sequence's final state."""
    value_heads = v.shape[1]
    g, beta = gates(A_log, a, dt_bias, b)
    qs, ks, s = widen(q, value_heads), widen(k, value_heads), scale_of(scale, q.shape[-1])
    starts, ends = cu_seqlens[:-1].long(), cu_seqlens[1:].long()
    lengths = ends - starts
    states = state.float().clone()
    output = torch.zeros((q.shape[0], value_heads, v.shape[-1]), dtype=torch.bfloat16, device=q.device)
    for t in range(int(lengths.max()) if lengths.numel() else 0):
        rows = torch.nonzero(lengths > t).flatten()
        token = starts[rows] + t
        o, states[rows] = step(states[rows], qs[token], ks[token], v[token].float(), g[token], beta[token], s)
        output[token] = o.to(torch.bfloat16)
    return output, states
'''


def _t(shape: list[str] | None, dtype: str, description: str) -> TensorSpec:
    return TensorSpec(shape=shape, dtype=dtype, description=description)  # type: ignore[arg-type]


def _axes(heads: int, value_heads: int) -> dict:
    return {
        "num_q_heads": AxisConst(value=heads, description="Query heads."),
        "num_k_heads": AxisConst(value=heads, description="Key heads (as many as query heads)."),
        "num_v_heads": AxisConst(
            value=value_heads, description="Value heads (state, gate and output heads)."
        ),
        "head_size": AxisConst(value=HEAD_SIZE),
    }


GATES = {
    "A_log": "Log decay per value head: g = exp(-exp(A_log) * softplus(a + dt_bias)).",
    "dt_bias": "Decay bias per value head, added to a before the softplus.",
}
SCALE = _t(None, "float32", "Output scale (1/sqrt(head_size) in the workloads; 0 or null means that too).")
MATH = (
    " Per value head h (query/key head h // (HV/H)) and token: g = exp(-exp(A_log) * softplus(a + dt_bias)), "
    "beta = sigmoid(b), S = g*S, S += beta * (v - S k) k^T (S [V, K], the k-last state), o = scale * S q. "
    "q and k are unit vectors (the model L2-normalises them before the kernel). Heads of Qwen3-Next's "
    "linear-attention layers at TP={tp}; name and workload uuids from the PTXBench problem list "
    "(gdn_problems.csv)."
)


def _per_token(tokens: list[str]) -> dict[str, TensorSpec]:
    return {
        "q": _t([*tokens, "num_q_heads", "head_size"], "bfloat16", "Queries (unit L2 norm)."),
        "k": _t([*tokens, "num_k_heads", "head_size"], "bfloat16", "Keys (unit L2 norm)."),
        "v": _t([*tokens, "num_v_heads", "head_size"], "bfloat16", "Values."),
    }


def _gate_inputs(tokens: list[str]) -> dict[str, TensorSpec]:
    return {
        "A_log": _t(["num_v_heads"], "float32", GATES["A_log"]),
        "a": _t([*tokens, "num_v_heads"], "bfloat16", "Input-dependent decay term per token and value head."),
        "dt_bias": _t(["num_v_heads"], "float32", GATES["dt_bias"]),
        "b": _t([*tokens, "num_v_heads"], "bfloat16", "Update gate input: beta = sigmoid(b)."),
    }


STATE = ["num_v_heads", "head_size", "head_size"]


def decode(heads: int, value_heads: int) -> Definition:
    """``gdn_decode_qk{H}_v{HV}_d128_k_last``: one token per sequence."""
    tokens = ["batch_size", "seq_len"]
    inputs = _per_token(tokens)
    inputs["state"] = _t(["batch_size", *STATE], "float32", "Recurrent state [B, HV, V, K] (k-last).")
    gate = _gate_inputs(tokens)
    inputs |= {
        "A_log": gate["A_log"],
        "a": gate["a"],
        "dt_bias": gate["dt_bias"],
        "b": gate["b"],
        "scale": SCALE,
    }
    return _definition(
        f"gdn_decode_qk{heads}_v{value_heads}_d{HEAD_SIZE}_k_last",
        "Gated delta net decode: one token per sequence, the state updated and returned." + MATH,
        "decode",
        {
            "batch_size": AxisVar(description="Sequences."),
            "seq_len": AxisConst(value=1),
            **_axes(heads, value_heads),
        },
        inputs,
        (tokens, "new_state", "batch_size", "State after the token [B, HV, V, K]."),
        _DECODE_RUN,
        heads,
    )


def mtp(heads: int, value_heads: int) -> Definition:
    """``gdn_mtp_qk{H}_v{HV}_d128_k_last``: seq_len tokens per sequence from a pooled state."""
    tokens = ["batch_size", "seq_len"]
    inputs = _per_token(tokens)
    inputs["initial_state"] = _t(
        ["pool_size", *STATE], "float32", "State pool [pool_size, HV, V, K] (k-last)."
    )
    inputs["initial_state_indices"] = _t(["batch_size"], "int32", "Pool slot of each sequence (distinct).")
    inputs |= _gate_inputs(tokens) | {"scale": SCALE}
    return _definition(
        f"gdn_mtp_qk{heads}_v{value_heads}_d{HEAD_SIZE}_k_last",
        "Gated delta net multi-token decode (speculative verification): seq_len tokens per sequence, sequence i "
        "starting from initial_state[initial_state_indices[i]]; returns every token's output and each "
        "sequence's state after its tokens (final_state [B, HV, V, K], not the pool)." + MATH,
        "mtp",
        {
            "batch_size": AxisVar(description="Sequences."),
            "seq_len": AxisVar(description="Tokens per sequence (draft length)."),
            "pool_size": AxisVar(description="Slots in the state pool."),
            **_axes(heads, value_heads),
        },
        inputs,
        (tokens, "final_state", "batch_size", "Each sequence's state after its tokens."),
        _MTP_RUN,
        heads,
    )


def prefill(heads: int, value_heads: int) -> Definition:
    """``gdn_prefill_qk{H}_v{HV}_d128_k_last``: variable-length sequences packed with cu_seqlens."""
    tokens = ["total_seq_len"]
    inputs = _per_token(tokens)
    inputs["state"] = _t(["num_seqs", *STATE], "float32", "Initial state of each sequence [N, HV, V, K].")
    inputs |= _gate_inputs(tokens)
    inputs["cu_seqlens"] = _t(["len_cu_seqlens"], "int64", "Row offsets of each sequence (num_seqs + 1).")
    inputs["scale"] = SCALE
    return _definition(
        f"gdn_prefill_qk{heads}_v{value_heads}_d{HEAD_SIZE}_k_last",
        "Gated delta net prefill: sequences packed along the token axis, sequence i is rows "
        "cu_seqlens[i]:cu_seqlens[i+1], starting from state[i]; returns every token's output and each "
        "sequence's final state." + MATH,
        "prefill",
        {
            "total_seq_len": AxisVar(description="Tokens of the batch."),
            "num_seqs": AxisVar(description="Sequences."),
            **_axes(heads, value_heads),
            "len_cu_seqlens": AxisVar(description="num_seqs + 1."),
        },
        inputs,
        (tokens, "new_state", "num_seqs", "Final state of each sequence [N, HV, V, K]."),
        _PREFILL_RUN,
        heads,
        constraints=["len_cu_seqlens == num_seqs + 1", "total_seq_len == cu_seqlens[-1].item()"],
    )


def _definition(
    name: str,
    description: str,
    stage: str,
    axes: dict,
    inputs: dict,
    outputs: tuple[list[str], str, str, str],
    run: str,
    heads: int,
    constraints: list[str] | None = None,
) -> Definition:
    """One GDN definition; ``outputs`` is (token axes, state output name, its batch axis, its description):
    the bf16 output per token and value head, then the fp32 state."""
    tokens, state, rows, note = outputs
    tp = 16 // heads
    return Definition(
        name=name,
        op_type="gdn",
        description=description.format(tp=tp),
        tags=[
            "suite:ptxbench-gdn",
            "source:ptxbench-problems",
            f"stage:{stage}",
            "layout:k-last",
            "model:qwen3-next",
        ],
        axes=axes,
        constraints=constraints or [],
        inputs=inputs,
        outputs={
            "output": _t(
                [*tokens, "num_v_heads", "head_size"], "bfloat16", "Output per token and value head."
            ),
            state: _t([rows, *STATE], "float32", note),
        },
        reference=GDN_CORE + run,
    )


def gdn_definitions() -> list[Definition]:
    """The six GDN definitions (decode, mtp, prefill for each head configuration)."""
    return [build(h, hv) for h, hv in CONFIGS for build in (decode, mtp, prefill)]
