"""Grouped-query attention definitions of the PTXBench problem list (``single_op_problems.csv``).

Three kinds, in FlashInfer's layouts (FlashInfer-Bench op types ``gqa_paged`` and ``gqa_ragged``), with the
input names, shapes and meanings of the public FlashInfer Trace definitions (the 2025 snapshot's
``gqa_paged_decode_h32_kv8_d128_ps1``, ``gqa_paged_prefill_causal_h32_kv8_d128_ps1`` and
``gqa_ragged_prefill_causal_h32_kv8_d128``, and the public page-size-64 definitions), so public solutions
run unchanged:

* ``gqa_paged_decode_h{H}_kv{KV}_d{D}_ps{P}``: one query per sequence, the KV cache in pages;
* ``gqa_paged_prefill_causal_h{H}_kv{KV}_d{D}_ps{P}``: ``q_len`` queries per sequence (the last tokens of a
  sequence of ``kv_len`` tokens), causal, the KV cache in pages;
* ``gqa_ragged_prefill_causal_h{H}_kv{KV}_d{D}``: the same with contiguous ragged K and V.

Inputs: ``q`` [rows, num_qo_heads, head_dim] bf16; the caches ``k_cache``/``v_cache`` [num_pages,
page_size, num_kv_heads, head_dim] bf16 (NHD pages) or ragged ``k``/``v`` [total_kv, num_kv_heads,
head_dim]; ``qo_indptr``, ``kv_indptr`` int32 [batch + 1]; ``kv_indices`` int32 (page ids); at page size
above 1 ``kv_last_page_len`` int32 [batch]; ``sm_scale`` a Python float (shape null). Outputs: ``output``
bf16 like ``q`` and ``lse`` fp32 [rows, num_qo_heads], the base-2 log-sum-exp of the scaled scores.

Two choices where the public definitions disagree with each other: the 2025 snapshot's page-size-1 decode
lists an input ``last_page_len`` that its own reference does not take (always 1 at page size 1), and declares
``sm_scale`` as a 0-d tensor while the op-type documents call it a scalar. We follow the references, the
FlashInfer-Bench op-type documents and the public solutions (``run(q, k_cache, v_cache, kv_indptr,
kv_indices, sm_scale)``): no ``last_page_len`` at page size 1, and ``sm_scale`` a scalar.
"""

from __future__ import annotations

from fibserve.trace import AxisConst, AxisVar, Definition, TensorSpec

from .ragged_attention import ATTENTION_CORE, PAGED_FETCH, RAGGED_FETCH

MODELS = {
    (32, 8, 128): "Llama 3.1 8B",
    (24, 8, 128): "Llama 3.2 3B",
    (5, 1, 128): "Llama 4 Scout 17B-16E at TP=8",
    (16, 1, 128): "Qwen3 235B A22B at TP=4",
    (16, 2, 128): "Qwen3 32B at TP=4",
    (8, 1, 256): "Qwen3 Next 80B A3B at TP=2",
}
"""(query heads, KV heads, head_dim) -> the model (and tensor parallelism) public FlashInfer Trace data names
for that head configuration; the others come from the problem list without a model."""

_PAGED_DECODE_RUN = '''

def run(q, k_cache, v_cache, kv_indptr, kv_indices, {last}sm_scale):
    """Paged GQA decode: one query per sequence (q [batch, Hq, D]); sequence b reads pages
    kv_indices[kv_indptr[b]:kv_indptr[b + 1]] of k_cache/v_cache [num_pages, page_size, Hkv, D]."""
    batch, heads, dim = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    output = torch.zeros((batch, heads, dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((batch, heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(batch):
        pages = kv_indices[int(kv_indptr[b]) : int(kv_indptr[b + 1])].long()
        kv_len = {kv_len}
        fetch = paged_fetch((k_cache, v_cache), lambda kv: (kv[0].float(), kv[1].float()), pages, page_size)
        o, row_lse = attend(q[b : b + 1], fetch, kv_len, kv_heads, False, sm_scale)
        output[b], lse[b] = o[0].to(torch.bfloat16), row_lse[0]
    return output, lse
'''

_PAGED_PREFILL_RUN = '''

def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, {last}sm_scale):
    """Paged causal GQA prefill: sequence b's queries are rows qo_indptr[b]:qo_indptr[b + 1] of q, its KV
    the pages kv_indices[kv_indptr[b]:kv_indptr[b + 1]]; the queries are its last tokens (bottom-right mask)."""
    rows, heads, dim = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    output = torch.zeros((rows, heads, dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((rows, heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(qo_indptr.shape[0] - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        pages = kv_indices[int(kv_indptr[b]) : int(kv_indptr[b + 1])].long()
        kv_len = {kv_len}
        if q1 <= q0:
            continue
        fetch = paged_fetch((k_cache, v_cache), lambda kv: (kv[0].float(), kv[1].float()), pages, page_size)
        o, row_lse = attend(q[q0:q1], fetch, kv_len, kv_heads, True, sm_scale)
        output[q0:q1], lse[q0:q1] = o.to(torch.bfloat16), row_lse
    return output, lse
'''

_RAGGED_PREFILL_RUN = '''

def run(q, k, v, qo_indptr, kv_indptr, sm_scale):
    """Ragged causal GQA prefill: sequence b's queries are rows qo_indptr[b]:qo_indptr[b + 1] of q and its
    keys and values rows kv_indptr[b]:kv_indptr[b + 1] of k and v; the queries are its last tokens."""
    rows, heads, dim = q.shape
    output = torch.zeros((rows, heads, dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.full((rows, heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(qo_indptr.shape[0] - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        k0, k1 = int(kv_indptr[b]), int(kv_indptr[b + 1])
        if q1 <= q0:
            continue
        o, row_lse = attend(q[q0:q1], ragged_fetch(k, v, k0), k1 - k0, k.shape[1], True, sm_scale)
        output[q0:q1], lse[q0:q1] = o.to(torch.bfloat16), row_lse
    return output, lse
'''

_KV_LEN = {
    True: "(pages.numel() - 1) * page_size + int(kv_last_page_len[b]) if pages.numel() else 0",
    False: "pages.numel()",
}
"""The token count of sequence b: with a last-page length (page size above 1) or one token per page."""


def _t(shape: list[str] | None, dtype: str, description: str) -> TensorSpec:
    return TensorSpec(shape=shape, dtype=dtype, description=description)  # type: ignore[arg-type]


def _heads(num_qo_heads: int, num_kv_heads: int, head_dim: int) -> dict:
    return {
        "num_qo_heads": AxisConst(value=num_qo_heads, description="Query heads."),
        "num_kv_heads": AxisConst(
            value=num_kv_heads, description="Key/value heads (query head h reads h // (Hq/Hkv))."
        ),
        "head_dim": AxisConst(value=head_dim),
    }


SCALE = _t(None, "float32", "Softmax scale applied to q . k (1/sqrt(head_dim) in the workloads).")
OUTPUT_NOTE = "Attention output, bf16."
LSE_NOTE = (
    "Base-2 log-sum-exp of the scaled scores of each query row and head (-inf for a row that sees no key)."
)


def _outputs(rows: str) -> dict[str, TensorSpec]:
    return {
        "output": _t([rows, "num_qo_heads", "head_dim"], "bfloat16", OUTPUT_NOTE),
        "lse": _t([rows, "num_qo_heads"], "float32", LSE_NOTE),
    }


def _paged_inputs(rows: str, page_size: int, prefill: bool) -> dict[str, TensorSpec]:
    cache = ["num_pages", "page_size", "num_kv_heads", "head_dim"]
    inputs = {
        "q": _t([rows, "num_qo_heads", "head_dim"], "bfloat16", "Queries."),
        "k_cache": _t(cache, "bfloat16", "Key cache, page-major (NHD within a page)."),
        "v_cache": _t(cache, "bfloat16", "Value cache, same layout as k_cache."),
    }
    if prefill:
        inputs["qo_indptr"] = _t(["len_indptr"], "int32", "Query row offsets of each sequence (batch + 1).")
    inputs["kv_indptr"] = _t(["len_indptr"], "int32", "Offsets into kv_indices of each sequence's pages.")
    inputs["kv_indices"] = _t(["num_kv_indices"], "int32", "Page ids of every sequence, in token order.")
    if page_size > 1:
        inputs["kv_last_page_len"] = _t(
            ["batch_size"], "int32", "Used slots of each sequence's last page (1..page_size)."
        )
    inputs["sm_scale"] = SCALE
    return inputs


def _description(kind: str, heads: tuple[int, int, int], layout: str) -> str:
    model = MODELS.get(heads)
    where = f" Head configuration of {model}." if model else ""
    return (
        f"{kind} grouped-query attention: {heads[0]} query heads share {heads[1]} key/value heads of dimension "
        f"{heads[2]} (query head h reads KV head h // {heads[0] // heads[1]}).{where} {layout} Outputs the "
        "attention output and the base-2 log-sum-exp of the scaled scores; computed in fp32 by the reference. "
        "Name and workload uuid from the PTXBench problem list (single_op_problems.csv)."
    )


PAGED_LAYOUT = (
    "The KV cache is paged: k_cache and v_cache [num_pages, page_size, num_kv_heads, head_dim]; sequence b "
    "owns pages kv_indices[kv_indptr[b]:kv_indptr[b+1]] in order, token t of it in slot t % page_size of "
    "page t // page_size{last}."
)
LAST_PAGE = ", and only the first kv_last_page_len[b] slots of its last page are used"
CAUSAL = (
    " Sequence b's queries are q rows qo_indptr[b]:qo_indptr[b+1], the last tokens of the sequence: query i "
    "of q_len sees KV token j of kv_len when j <= i + kv_len - q_len (causal, aligned bottom-right)."
)


def _paged_reference(run: str, page_size: int) -> str:
    """The reference source of a paged definition: the core, the page-table fetch and ``run`` for the page size
    (a ``kv_last_page_len`` input above page size 1)."""
    last = "kv_last_page_len, " if page_size > 1 else ""
    return ATTENTION_CORE + PAGED_FETCH + run.format(last=last, kv_len=_KV_LEN[page_size > 1])


def paged_decode(heads: tuple[int, int, int], page_size: int) -> Definition:
    """``gqa_paged_decode_h{H}_kv{KV}_d{D}_ps{P}``."""
    last = LAST_PAGE if page_size > 1 else ""
    return Definition(
        name=f"gqa_paged_decode_h{heads[0]}_kv{heads[1]}_d{heads[2]}_ps{page_size}",
        op_type="gqa_paged",
        description=_description(
            "Batched decode (one query per sequence),", heads, PAGED_LAYOUT.format(last=last)
        ),
        tags=_tags("decode", "paged", page_size, heads, causal=False),
        axes={
            "batch_size": AxisVar(description="Sequences (one query each)."),
            **_heads(*heads),
            "num_pages": AxisVar(description="Pages in the cache."),
            "page_size": AxisConst(value=page_size),
            "len_indptr": AxisVar(description="batch_size + 1."),
            "num_kv_indices": AxisVar(description="Pages referenced by the batch."),
        },
        constraints=["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
        inputs=_paged_inputs("batch_size", page_size, prefill=False),
        outputs=_outputs("batch_size"),
        reference=_paged_reference(_PAGED_DECODE_RUN, page_size),
    )


def paged_prefill(heads: tuple[int, int, int], page_size: int) -> Definition:
    """``gqa_paged_prefill_causal_h{H}_kv{KV}_d{D}_ps{P}``."""
    last = LAST_PAGE if page_size > 1 else ""
    axes = {
        **_heads(*heads),
        "page_size": AxisConst(value=page_size),
        "len_indptr": AxisVar(description="batch + 1 (qo_indptr and kv_indptr)."),
        "total_q": AxisVar(description="Query rows of the whole batch."),
        "num_kv_indices": AxisVar(description="Pages referenced by the batch."),
        "num_pages": AxisVar(description="Pages in the cache."),
    }
    if page_size > 1:
        axes["batch_size"] = AxisVar(description="Sequences (len_indptr - 1).")
    constraints = ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"]
    if page_size > 1:
        constraints.insert(0, "len_indptr == batch_size + 1")
    return Definition(
        name=f"gqa_paged_prefill_causal_h{heads[0]}_kv{heads[1]}_d{heads[2]}_ps{page_size}",
        op_type="gqa_paged",
        description=_description("Batched causal prefill", heads, PAGED_LAYOUT.format(last=last) + CAUSAL),
        tags=_tags("prefill", "paged", page_size, heads, causal=True),
        axes=axes,
        constraints=constraints,
        inputs=_paged_inputs("total_q", page_size, prefill=True),
        outputs=_outputs("total_q"),
        reference=_paged_reference(_PAGED_PREFILL_RUN, page_size),
    )


def ragged_prefill(heads: tuple[int, int, int]) -> Definition:
    """``gqa_ragged_prefill_causal_h{H}_kv{KV}_d{D}``."""
    ragged = ["total_kv", "num_kv_heads", "head_dim"]
    layout = (
        "K and V are ragged: k and v [total_kv, num_kv_heads, head_dim], sequence b owns rows "
        "kv_indptr[b]:kv_indptr[b+1]."
    )
    return Definition(
        name=f"gqa_ragged_prefill_causal_h{heads[0]}_kv{heads[1]}_d{heads[2]}",
        op_type="gqa_ragged",
        description=_description("Batched causal prefill", heads, layout + CAUSAL),
        tags=_tags("prefill", "ragged", None, heads, causal=True),
        axes={
            **_heads(*heads),
            "len_indptr": AxisVar(description="batch + 1 (qo_indptr and kv_indptr)."),
            "total_q": AxisVar(description="Query rows of the whole batch."),
            "total_kv": AxisVar(description="Key/value rows of the whole batch."),
        },
        constraints=["total_q == qo_indptr[-1].item()", "total_kv == kv_indptr[-1].item()"],
        inputs={
            "q": _t(["total_q", "num_qo_heads", "head_dim"], "bfloat16", "Queries."),
            "k": _t(ragged, "bfloat16", "Keys."),
            "v": _t(ragged, "bfloat16", "Values."),
            "qo_indptr": _t(["len_indptr"], "int32", "Query row offsets of each sequence (batch + 1)."),
            "kv_indptr": _t(["len_indptr"], "int32", "Key/value row offsets of each sequence (batch + 1)."),
            "sm_scale": SCALE,
        },
        outputs=_outputs("total_q"),
        reference=ATTENTION_CORE + RAGGED_FETCH + _RAGGED_PREFILL_RUN,
    )


def _tags(
    stage: str, layout: str, page_size: int | None, heads: tuple[int, int, int], causal: bool
) -> list[str]:
    tags = ["suite:ptxbench-gqa", "source:ptxbench-problems", f"stage:{stage}", f"layout:{layout}"]
    tags.append(f"head_dim:{heads[2]}")
    if page_size is not None:
        tags.append(f"page_size:{page_size}")
    model = MODELS.get(heads)
    if model:
        tags.append("model:" + model.split(" at ")[0].lower().replace(" ", "-"))
    return tags + (["causal"] if causal else [])
