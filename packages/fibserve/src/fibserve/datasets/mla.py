"""Multi-head latent attention definitions of the PTXBench problem list (DeepSeek-V3 at TP=8, 16 heads).

In FlashInfer's layouts (FlashInfer-Bench op types ``mla_paged`` and ``mla_ragged``), with the input names,
shapes and meanings of the 2025 snapshot's definitions of the same names, so public solutions run unchanged:

* ``mla_paged_decode_h16_ckv512_kpe64_ps1`` and ``mla_paged_prefill_causal_h16_ckv512_kpe64_ps1``: the
  absorbed form. Each token's cache entry is a compressed KV vector ``ckv`` (512) and a rotary key part
  ``kpe`` (64), shared by all 16 heads: scores ``q_nope . ckv + q_pe . kpe`` (times ``sm_scale``), output the
  softmax-weighted sum of ``ckv`` (512 per head). It is grouped-query attention with one KV head of
  dimension 576 for keys and 512 for values.
* ``mla_ragged_prefill_causal_h16_qk192_vo128``: the non-absorbed prefill over a whole sequence (queries and
  keys are the same tokens): 16 heads, q and k of 192 (128 + 64 rotary), v and output of 128.

``sm_scale`` is a Python float (shape null; the snapshot's 0-d tensor, see :mod:`fibserve.datasets.gqa`);
the workloads give ``1/sqrt(192)``, the scale of DeepSeek-V3's 192-wide query-key heads without its YaRN
factor.
"""

from __future__ import annotations

from fibserve.trace import AxisConst, AxisVar, Definition, TensorSpec

from .gqa import CAUSAL, LSE_NOTE
from .ragged_attention import ATTENTION_CORE, PAGED_FETCH, RAGGED_FETCH

HEADS = 16
CKV, KPE = 512, 64
QK, VO = 192, 128

_FETCH = "lambda kv: (torch.cat((kv[0], kv[1]), dim=-1).float()[:, None], kv[0].float()[:, None])"
"""Gathered (ckv, kpe) tokens [n, 512], [n, 64] -> keys [n, 1, 576] and values [n, 1, 512] in fp32."""

_PAGED_RUN = '''

def run(q_nope, q_pe, ckv_cache, kpe_cache, {qo}kv_indptr, kv_indices, sm_scale):
    """Paged MLA ({kind}): keys are (ckv, kpe) of each token, values its ckv; one KV head for all heads."""
    rows, heads, _ = q_nope.shape
    page_size = ckv_cache.shape[1]
    q = torch.cat((q_nope, q_pe), dim=-1)
    output = torch.zeros((rows, heads, ckv_cache.shape[-1]), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((rows, heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(kv_indptr.shape[0] - 1):
        q0, q1 = {rows}
        pages = kv_indices[int(kv_indptr[b]) : int(kv_indptr[b + 1])].long()
        if q1 <= q0:
            continue
        fetch = paged_fetch((ckv_cache, kpe_cache), {fetch}, pages, page_size)
        o, row_lse = attend(q[q0:q1], fetch, pages.numel() * page_size, 1, {causal}, sm_scale)
        output[q0:q1], lse[q0:q1] = o.to(torch.bfloat16), row_lse
    return output, lse
'''

_RAGGED_RUN = '''

def run(q, k, v, seq_indptr, sm_scale):
    """Ragged causal MLA prefill: sequence b is rows seq_indptr[b]:seq_indptr[b + 1] of q, k and v alike."""
    rows, heads, _ = q.shape
    output = torch.zeros((rows, heads, v.shape[-1]), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((rows, heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(seq_indptr.shape[0] - 1):
        s0, s1 = int(seq_indptr[b]), int(seq_indptr[b + 1])
        if s1 <= s0:
            continue
        o, row_lse = attend(q[s0:s1], ragged_fetch(k, v, s0), s1 - s0, heads, True, sm_scale)
        output[s0:s1], lse[s0:s1] = o.to(torch.bfloat16), row_lse
    return output, lse
'''


def _t(shape: list[str] | None, dtype: str, description: str) -> TensorSpec:
    return TensorSpec(shape=shape, dtype=dtype, description=description)  # type: ignore[arg-type]


SCALE = _t(None, "float32", "Softmax scale applied to the scores (1/sqrt(192) in the workloads).")
SOURCE = (
    " Shapes of DeepSeek-V3 at tensor parallelism 8 (16 of its 128 heads). Name and workload uuid from the "
    "PTXBench problem list (single_op_problems.csv)."
)
PAGED = (
    "Absorbed multi-head latent attention over a paged cache: each token stores a compressed KV vector "
    "(ckv_cache [num_pages, page_size, 512]) and a rotary key part (kpe_cache [num_pages, page_size, 64]), "
    "shared by the 16 query heads; score = (q_nope . ckv + q_pe . kpe) * sm_scale, output = softmax-weighted "
    "sum of ckv (512 per head), lse the base-2 log-sum-exp of the scaled scores. Sequence b owns pages "
    "kv_indices[kv_indptr[b]:kv_indptr[b+1]] (page size 1: one token per page)."
)


def _paged(stage: str) -> Definition:
    prefill = stage == "prefill"
    rows = "total_q" if prefill else "batch_size"
    axes = {
        "num_qo_heads": AxisConst(value=HEADS),
        "head_dim_ckv": AxisConst(value=CKV),
        "head_dim_kpe": AxisConst(value=KPE),
        "page_size": AxisConst(value=1),
        "num_pages": AxisVar(description="Pages (tokens) in the cache."),
        "len_indptr": AxisVar(description="batch + 1."),
        "num_kv_indices": AxisVar(description="Pages referenced by the batch."),
    }
    axes |= (
        {"total_q": AxisVar(description="Query rows of the batch.")}
        if prefill
        else {"batch_size": AxisVar(description="Sequences (one query each).")}
    )
    inputs = {
        "q_nope": _t([rows, "num_qo_heads", "head_dim_ckv"], "bfloat16", "Query, absorbed non-rotary part."),
        "q_pe": _t([rows, "num_qo_heads", "head_dim_kpe"], "bfloat16", "Query, rotary part."),
        "ckv_cache": _t(["num_pages", "page_size", "head_dim_ckv"], "bfloat16", "Compressed KV cache."),
        "kpe_cache": _t(["num_pages", "page_size", "head_dim_kpe"], "bfloat16", "Rotary key cache."),
    }
    if prefill:
        inputs["qo_indptr"] = _t(["len_indptr"], "int32", "Query row offsets of each sequence.")
    inputs |= {
        "kv_indptr": _t(["len_indptr"], "int32", "Offsets into kv_indices of each sequence's pages."),
        "kv_indices": _t(["num_kv_indices"], "int32", "Page ids of every sequence, in token order."),
        "sm_scale": SCALE,
    }
    constraints = ["num_kv_indices == kv_indptr[-1].item()"]
    constraints.insert(0, "total_q == qo_indptr[-1].item()" if prefill else "len_indptr == batch_size + 1")
    name = "mla_paged_prefill_causal" if prefill else "mla_paged_decode"
    return Definition(
        name=f"{name}_h{HEADS}_ckv{CKV}_kpe{KPE}_ps1",
        op_type="mla_paged",
        description=("Batched causal prefill: " if prefill else "Batched decode (one query per sequence): ")
        + PAGED
        + (CAUSAL if prefill else "")
        + SOURCE,
        tags=_tags(stage, "paged") + ["page_size:1"] + (["causal"] if prefill else []),
        axes=axes,
        constraints=constraints,
        inputs=inputs,
        outputs={
            "output": _t(
                [rows, "num_qo_heads", "head_dim_ckv"], "bfloat16", "Attention output (512 per head)."
            ),
            "lse": _t([rows, "num_qo_heads"], "float32", LSE_NOTE),
        },
        reference=ATTENTION_CORE
        + PAGED_FETCH
        + _PAGED_RUN.format(
            qo="qo_indptr, " if prefill else "",
            kind="causal prefill" if prefill else "decode",
            rows="int(qo_indptr[b]), int(qo_indptr[b + 1])" if prefill else "b, b + 1",
            fetch=_FETCH,
            causal=prefill,
        ),
    )


def paged_decode() -> Definition:
    """``mla_paged_decode_h16_ckv512_kpe64_ps1``."""
    return _paged("decode")


def paged_prefill() -> Definition:
    """``mla_paged_prefill_causal_h16_ckv512_kpe64_ps1``."""
    return _paged("prefill")


def ragged_prefill() -> Definition:
    """``mla_ragged_prefill_causal_h16_qk192_vo128``: causal attention over whole sequences."""
    qk = ["total_tokens", "num_qo_heads", "head_dim_qk"]
    vo = ["total_tokens", "num_qo_heads", "head_dim_vo"]
    return Definition(
        name=f"mla_ragged_prefill_causal_h{HEADS}_qk{QK}_vo{VO}",
        op_type="mla_ragged",
        description=(
            "Causal multi-head latent attention prefill over whole sequences, not absorbed: 16 heads, q and k of "
            "192 (128 + 64 rotary), v and output of 128. Sequence b is rows seq_indptr[b]:seq_indptr[b+1] of "
            "q, k and v (queries and keys are the same tokens); query i sees keys j <= i. lse is the base-2 "
            "log-sum-exp of the scaled scores." + SOURCE
        ),
        tags=[*_tags("prefill", "ragged"), "causal"],
        axes={
            "num_qo_heads": AxisConst(value=HEADS),
            "head_dim_qk": AxisConst(value=QK),
            "head_dim_vo": AxisConst(value=VO),
            "len_indptr": AxisVar(description="batch + 1."),
            "total_tokens": AxisVar(description="Tokens of the batch (queries and keys alike)."),
        },
        constraints=["total_tokens == seq_indptr[-1].item()"],
        inputs={
            "q": _t(qk, "bfloat16", "Queries."),
            "k": _t(qk, "bfloat16", "Keys."),
            "v": _t(vo, "bfloat16", "Values."),
            "seq_indptr": _t(["len_indptr"], "int32", "Row offsets of each sequence (queries and keys)."),
            "sm_scale": SCALE,
        },
        outputs={
            "output": _t(vo, "bfloat16", "Attention output."),
            "lse": _t(["total_tokens", "num_qo_heads"], "float32", LSE_NOTE),
        },
        reference=ATTENTION_CORE + RAGGED_FETCH + _RAGGED_RUN,
    )


def _tags(stage: str, layout: str) -> list[str]:
    return [
        "suite:ptxbench-mla",
        "source:ptxbench-problems",
        f"stage:{stage}",
        f"layout:{layout}",
        "model:deepseek-v3",
    ]
