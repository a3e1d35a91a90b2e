"""FLOPs and compulsory bytes of the inference ops, for the roofline (:mod:`fibserve.bench.timing.roofline`).

Counts from the actual index inputs of the workload's input set (the lengths of every sequence), so a batch of
short and long sequences is priced as it is:

* **Paged and ragged attention** (GQA, MLA; FlashInfer layouts): ``2 * Hq * (Dqk + Dv)`` FLOPs per visible
  (query, key) pair (QK^T and PV), the pairs per sequence from :func:`fibserve.bench.data.paged.visible_pairs`
  (bottom-right causal mask for definitions tagged or named ``causal``; one query per sequence in decode).
  Head sizes: ``head_dim`` (GQA); ``head_dim_ckv + head_dim_kpe`` for keys and ``head_dim_ckv`` for values
  (absorbed MLA); ``head_dim_qk`` and ``head_dim_vo`` (ragged MLA). Bytes: every input and output except the
  paged caches, of which only the KV tokens the batch uses count (a kernel need not read the rest of the pool).
* **Gated delta net**: ``7 * K * V`` FLOPs per token and value head (decay ``S*g``, the prediction ``S k``,
  the rank-one update, the output ``S q``: 1 + 2 + 2 + 2 multiply-adds per state element); bytes of every
  input and output, of a pooled state only the slots the batch reads. Priced at the bf16 peak: chunked GDN
  kernels run their products on bf16 tensor cores (a lower floor than the fp32 one, so no honest kernel is
  flagged).
* **FP8 GEMM with block scales**: ``2 * M * N * K`` FLOPs at the FP8 peak; bytes of the operands, their scales
  and the output.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import torch

from fibserve.bench.data.paged import visible_pairs
from fibserve.trace import Definition

Cost = tuple[float, float, str]
"""(FLOPs, bytes, dtype family of the peak: ``bf16``, ``fp8`` or ``fp32``)."""

GDN_FLOPS_PER_STATE_ELEMENT = 7


def nbytes(value: Any) -> int:
    """Bytes of a tensor (0 for a Python scalar)."""
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0


def _host(values: Any) -> list[int]:
    return values.detach().to("cpu", torch.int64).tolist()


def _diffs(indptr: Any) -> list[int]:
    return [b - a for a, b in itertools.pairwise(_host(indptr))]


def inference_cost(
    definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any], outputs: Mapping[str, Any]
) -> Cost | None:
    """The cost of a paged or ragged attention, GDN or FP8 GEMM call (module docstring); None for other ops
    or when the inputs do not have the shapes these counts need."""
    op = definition.op_type.lower()
    out_bytes = sum(nbytes(v) for v in outputs.values())
    if op == "fp8_gemm" and all(k in axes for k in ("M", "N", "K")):
        flops = 2.0 * axes["M"] * axes["N"] * axes["K"]
        return flops, float(sum(nbytes(v) for v in inputs.values()) + out_bytes), "fp8"
    if op == "gdn" or {"A_log", "dt_bias"} <= set(inputs):
        return _gdn_cost(inputs, out_bytes)
    if any(isinstance(inputs.get(n), torch.Tensor) for n in ("kv_indptr", "seq_indptr")):
        return _attention_cost(definition, axes, inputs, out_bytes)
    return None


def _lengths(axes: Mapping[str, int], inputs: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """(query lengths, KV token lengths) per sequence."""
    if isinstance(inputs.get("seq_indptr"), torch.Tensor):
        lens = _diffs(inputs["seq_indptr"])
        return lens, lens
    kv = _diffs(inputs["kv_indptr"])
    if isinstance(inputs.get("kv_indices"), torch.Tensor):
        page_size = axes.get("page_size", 1)
        last = next((inputs[n] for n in ("kv_last_page_len", "last_page_len") if n in inputs), None)
        if page_size > 1 and isinstance(last, torch.Tensor) and last.numel() == len(kv):
            kv = [(p - 1) * page_size + n if p else 0 for p, n in zip(kv, _host(last), strict=True)]
        else:
            kv = [p * page_size for p in kv]
    q = _diffs(inputs["qo_indptr"]) if isinstance(inputs.get("qo_indptr"), torch.Tensor) else [1] * len(kv)
    return q, kv


def _head_sizes(axes: Mapping[str, int]) -> tuple[int, int] | None:
    if "head_dim_ckv" in axes:
        return axes["head_dim_ckv"] + axes.get("head_dim_kpe", 0), axes["head_dim_ckv"]
    if "head_dim_qk" in axes:
        return axes["head_dim_qk"], axes.get("head_dim_vo", axes["head_dim_qk"])
    if "head_dim" in axes:
        return axes["head_dim"], axes["head_dim"]
    return None


def _attention_cost(
    definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any], out_bytes: int
) -> Cost | None:
    heads = next((axes[k] for k in ("num_qo_heads", "num_heads", "num_q_heads") if k in axes), None)
    sizes = _head_sizes(axes)
    if heads is None or sizes is None:
        return None
    q_lens, kv_lens = _lengths(axes, inputs)
    if len(q_lens) != len(kv_lens):
        return None
    causal = "causal" in definition.tags or "causal" in definition.name
    pairs = sum(visible_pairs(q, k, causal) for q, k in zip(q_lens, kv_lens, strict=True))
    flops = 2.0 * heads * sum(sizes) * pairs
    caches = {
        n: v for n, v in inputs.items() if "cache" in n and isinstance(v, torch.Tensor) and v.dim() >= 2
    }
    token_bytes = sum(nbytes(v) // max(1, v.shape[0] * v.shape[1]) for v in caches.values())
    small = sum(nbytes(v) for n, v in inputs.items() if n not in caches)
    family = (
        "fp8" if any(v.dtype.itemsize == 1 and v.is_floating_point() for v in caches.values()) else "bf16"
    )
    return flops, float(small + out_bytes + token_bytes * sum(kv_lens)), family


def _gdn_cost(inputs: Mapping[str, Any], out_bytes: int) -> Cost | None:
    v, state = inputs.get("v"), next((inputs[n] for n in ("state", "initial_state") if n in inputs), None)
    if not isinstance(v, torch.Tensor) or not isinstance(state, torch.Tensor) or state.dim() < 3:
        return None
    tokens = v.numel() // (v.shape[-1] * v.shape[-2])
    flops = float(GDN_FLOPS_PER_STATE_ELEMENT * tokens * v.shape[-2] * state.shape[-1] * state.shape[-2])
    slots = inputs.get("initial_state_indices")
    read = nbytes(state) if not isinstance(slots, torch.Tensor) else nbytes(state[0]) * slots.numel()
    rest = sum(nbytes(x) for n, x in inputs.items() if x is not state)
    return flops, float(rest + read + out_bytes), "bf16"
