"""Baseline Solutions of the inference-op suite: what GQA, MLA, GDN and FP8-GEMM speed is measured against.

Each is the fastest correct path we know PyTorch to reach on the GPU image, chosen at its first call (the
first path that runs, in the order below), with the definition's exact reference as the last resort; the
benchmark (``benchmarks/inference_baselines.py``) names the path each one took. The Solution carries the
definition's reference source under the name ``reference_run`` for that last resort.

* GQA (``gqa_paged``, ``gqa_ragged``): FlashAttention-2's variable-length kernel in PyTorch
  (``aten._flash_attention_forward`` with ``cum_seq_q``/``cum_seq_k``: grouped-query heads and the
  bottom-right causal mask natively), on the KV tokens gathered from the pages into one ragged tensor
  (PyTorch's FlashAttention-2 takes no page table, so the gather is part of the baseline's time). Its
  natural-log LSE [heads, rows] becomes base 2 [rows, heads].
* MLA ragged (q/k 192, v 128): the same kernel with v zero-padded to 192 (FlashAttention-2 needs one head
  size), the output sliced back to 128.
* MLA paged (absorbed: keys 576 = ckv 512 + kpe 64, values the ckv 512, one KV head): beyond
  FlashAttention-2's head size 256, so PyTorch's memory-efficient kernel (``aten._efficient_attention_forward``,
  variable length, the KV head broadcast to the 16 query heads, bottom-right causal mask type 2).
* GDN: nothing fast is reachable from PyTorch (FlashInfer's and FLA's kernels are separate packages), so the
  baseline is the reference itself, and its description says so: a speedup against it is not a speedup
  against a GDN kernel.
* FP8 GEMM: ``torch._scaled_mm`` with 1x128 activation and 128x128 weight block scales (PyTorch's blockwise
  FP8 GEMM on Hopper), else ``torch._scaled_mm`` per 128-wide K block with unit scales (exact e4m3 products,
  fp32 output) and the block scales applied in fp32. Not the operands dequantized to bf16 and one bf16 GEMM:
  rounding ``e4m3 * scale`` to bf16 costs 2^-9 per operand, and over K = 2048 that missed the ``fp8_gemm``
  tolerance on 11% of the elements (CPU, ``fp8_gemm_n7168_k2048``, M = 64).
"""

from __future__ import annotations

from fibserve.trace import Definition, Solution

from .baselines import baseline_solution

CHOOSER = '''

_CHOSEN = []
"""The path chosen at the first call (its function)."""


def choose(paths, *args):
    """Run the first of paths that runs on these arguments (remembered for later calls)."""
    if _CHOSEN:
        return _CHOSEN[0](*args)
    for path in paths[:-1]:
        try:
            result = path(*args)
        except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
            continue
        _CHOSEN.append(path)
        return result
    _CHOSEN.append(paths[-1])
    return paths[-1](*args)
'''

VARLEN = '''
import math

import torch

aten = torch.ops.aten


def offsets(lengths):
    """[0, cumsum(lengths)...] as int32 (FlashAttention's cu_seqlens)."""
    return torch.nn.functional.pad(torch.cumsum(lengths, 0), (1, 0)).to(torch.int32)


def gather(cache, kv_indptr, kv_indices, lengths, page_size):
    """The KV tokens of every sequence, in order, from cache [num_pages, page_size, ...]: [sum(lengths), ...]."""
    if page_size == 1:
        return cache[kv_indices.long(), 0]
    seq = torch.repeat_interleave(torch.arange(lengths.numel(), device=cache.device), lengths)
    starts = torch.cumsum(lengths, 0) - lengths
    t = torch.arange(seq.numel(), device=cache.device) - starts[seq]
    page = kv_indices[kv_indptr[seq].long() + torch.div(t, page_size, rounding_mode="floor")].long()
    return cache[page, t % page_size]


def lengths_of(kv_indptr, last_page_len, page_size):
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    return pages if last_page_len is None else (pages - 1) * page_size + last_page_len.long()


def base2_rows(lse, cu_q, rows):
    """A natural-log LSE, [heads, rows] or one padded row per sequence [batch, heads, >= max_q], as base 2
    [rows, heads]."""
    if lse.dim() == 3:
        seq = torch.repeat_interleave(torch.arange(cu_q.numel() - 1, device=lse.device), (cu_q[1:] - cu_q[:-1]).long())
        position = torch.arange(rows, device=lse.device) - cu_q[seq].long()
        lse = lse[seq, :, position].t()
    return lse.t().float() / math.log(2.0)


def flash(q, k, v, cu_q, cu_k, max_q, max_k, causal, sm_scale):
    """FlashAttention-2 varlen: q [rows, Hq, D], k and v [tokens, Hkv, D] -> (output, base-2 lse [rows, Hq])."""
    out = aten._flash_attention_forward(q, k, v, cu_q, cu_k, max_q, max_k, 0.0, causal, False, scale=float(sm_scale))
    return out[0], base2_rows(out[1], cu_q, q.shape[0])


def efficient(q, k, v, cu_q, cu_k, max_q, max_k, causal, sm_scale):
    """The memory-efficient varlen kernel; k and v may have one head (broadcast to q's heads)."""
    heads = q.shape[1]
    k, v = k.expand(-1, heads, -1), v.expand(-1, heads, -1)
    out = aten._efficient_attention_forward(
        q[None], k[None], v[None], None, cu_q, cu_k, max_q, max_k, 0.0, 2 if causal else 0, True,
        scale=float(sm_scale),
    )
    lse = out[1]
    if lse.shape[0] == 1 and cu_q.numel() > 2:  # one packed row of every query, not one row per sequence
        lse = lse[0, :, : q.shape[0]]
    return out[0][0], base2_rows(lse, cu_q, q.shape[0])
'''

GQA_PAGED = """

def fast(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, qo_indptr=None, kv_last_page_len=None):
    page_size = k_cache.shape[1]
    lengths = lengths_of(kv_indptr, kv_last_page_len, page_size)
    k = gather(k_cache, kv_indptr, kv_indices, lengths, page_size)
    v = gather(v_cache, kv_indptr, kv_indices, lengths, page_size)
    decode = qo_indptr is None
    cu_q = torch.arange(q.shape[0] + 1, dtype=torch.int32, device=q.device) if decode else qo_indptr.to(torch.int32)
    max_q = 1 if decode else int((cu_q[1:] - cu_q[:-1]).max())
    return flash(q, k, v, cu_q, offsets(lengths), max_q, int(lengths.max()), not decode, sm_scale)
"""

GQA_RAGGED = """

def fast(q, k, v, qo_indptr, kv_indptr, sm_scale):
    cu_q, cu_k = qo_indptr.to(torch.int32), kv_indptr.to(torch.int32)
    max_q, max_k = int((cu_q[1:] - cu_q[:-1]).max()), int((cu_k[1:] - cu_k[:-1]).max())
    return flash(q, k, v, cu_q, cu_k, max_q, max_k, True, sm_scale)
"""

MLA_RAGGED = """

def fast(q, k, v, seq_indptr, sm_scale):
    cu = seq_indptr.to(torch.int32)
    longest = int((cu[1:] - cu[:-1]).max())
    padded = torch.nn.functional.pad(v, (0, q.shape[-1] - v.shape[-1]))
    out, lse = flash(q, k, padded, cu, cu, longest, longest, True, sm_scale)
    return out[..., : v.shape[-1]], lse
"""

MLA_PAGED = """

def fast(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale, qo_indptr=None):
    lengths = lengths_of(kv_indptr, None, 1)
    q = torch.cat((q_nope, q_pe), dim=-1)
    ckv = gather(ckv_cache, kv_indptr, kv_indices, lengths, 1)
    k = torch.cat((ckv, gather(kpe_cache, kv_indptr, kv_indices, lengths, 1)), dim=-1)
    decode = qo_indptr is None
    cu_q = torch.arange(q.shape[0] + 1, dtype=torch.int32, device=q.device) if decode else qo_indptr.to(torch.int32)
    max_q = 1 if decode else int((cu_q[1:] - cu_q[:-1]).max())
    return efficient(q, k[:, None], ckv[:, None], cu_q, offsets(lengths), max_q, int(lengths.max()), not decode, sm_scale)
"""

FP8_GEMM = '''
import torch

BLOCK = 128


def _m_major(scale):
    return scale.t().contiguous().t()


LAYOUTS = (
    (_m_major, lambda s: s.t()),
    (_m_major, lambda s: s.t().contiguous()),
    (lambda s: s, lambda s: s.t().contiguous()),
)
"""(activation scale, weight scale) layouts tried for torch._scaled_mm's blockwise scaling, in this order."""


def _scaled_mm(layout):
    def path(A, A_scale, B, B_scale):
        scale_a, scale_b = layout[0](A_scale), layout[1](B_scale)
        return torch._scaled_mm(A, B.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)

    path.__name__ = "scaled_mm_blockwise"
    return path


def per_k_block(A, A_scale, B, B_scale):
    """FP8 tensor cores one 128-wide K block at a time (exact e4m3 products, fp32 sums, tensorwise
    torch._scaled_mm), each block's product scaled by A_scale x B_scale and added in fp32: one pass over C per
    K block, so slower than the blockwise kernel, but as exact."""
    m, k = A.shape
    one = torch.ones((), dtype=torch.float32, device=A.device)
    scale_b = B_scale.repeat_interleave(BLOCK, 0)[: B.shape[0]]
    c = torch.zeros((m, B.shape[0]), dtype=torch.float32, device=A.device)
    for i, k0 in enumerate(range(0, k, BLOCK)):
        part = torch._scaled_mm(
            A[:, k0 : k0 + BLOCK], B[:, k0 : k0 + BLOCK].t(), scale_a=one, scale_b=one, out_dtype=torch.float32
        )
        c.add_(part.mul_(A_scale[:, i : i + 1]).mul_(scale_b[:, i][None, :]))
    return c.to(torch.bfloat16)


def run(A, A_scale, B, B_scale):
    return choose([*(_scaled_mm(layout) for layout in LAYOUTS), per_k_block, reference], A, A_scale, B, B_scale)
'''

DESCRIPTIONS = {
    "gqa": "FlashAttention-2 (PyTorch, variable length) on the KV tokens gathered from the pages (the gather is "
    "timed); the exact reference where that kernel refuses the shape.",
    "gqa_ragged": "FlashAttention-2 (PyTorch, variable length) on the ragged tensors; the exact reference where "
    "that kernel refuses the shape.",
    "mla_ragged": "FlashAttention-2 (PyTorch, variable length) with v zero-padded to the query-key head size; "
    "the exact reference where that kernel refuses the shape.",
    "mla_paged": "PyTorch's memory-efficient attention (variable length, the one KV head broadcast) on the tokens "
    "gathered from the pages; the exact reference where that kernel refuses the shape.",
    "gdn": "Not a fast kernel: the definition's reference itself (fp32, token by token). Nothing faster for the "
    "gated delta rule is reachable from PyTorch, so a speedup against it is not a speedup against a GDN kernel "
    "(FlashInfer's or FLA's).",
    "fp8_gemm": "torch._scaled_mm with 1x128 / 128x128 block scales (PyTorch's blockwise FP8 GEMM); where PyTorch "
    "refuses that, torch._scaled_mm one 128-wide K block at a time with the scales applied in fp32 (as exact, "
    "slower: one pass over C per K block); the exact reference where neither runs.",
}


def _with_reference(definition: Definition, code: str) -> str:
    """The definition's reference (its ``run`` kept as ``reference_run``), then ``code``."""
    return definition.reference + REFERENCE_FALLBACK + CHOOSER + code


REFERENCE_FALLBACK = '''

reference_run = run


def reference(*inputs):
    """The definition's exact reference: the last resort, where no fast path runs."""
    return reference_run(*inputs)
'''

ENTRY = """

def {kind}({params}):
    return fast({keywords})


def run({params}):
    return choose([{kind}, reference], {params})
"""
"""The entry: the fast path by name (what the benchmark reports), the reference after it."""


def _entry(definition: Definition, kind: str) -> str:
    params = list(definition.inputs)
    return ENTRY.format(kind=kind, params=", ".join(params), keywords=", ".join(f"{n}={n}" for n in params))


def inference_baseline(definition: Definition) -> Solution | None:
    """The baseline Solution of a GQA, MLA, GDN or FP8-GEMM definition of this suite, or None for other op
    types (see the module docstring for each)."""
    op = definition.op_type
    attention = {
        "gqa_paged": (GQA_PAGED, "flash_varlen", "gqa"),
        "gqa_ragged": (GQA_RAGGED, "flash_varlen", "gqa_ragged"),
        "mla_ragged": (MLA_RAGGED, "flash_varlen", "mla_ragged"),
        "mla_paged": (MLA_PAGED, "efficient_varlen", "mla_paged"),
    }
    if op in attention:
        template, kind, key = attention[op]
        code = VARLEN + template + _entry(definition, kind)
    elif op == "gdn":
        return baseline_solution(definition, "reference", definition.reference, DESCRIPTIONS["gdn"])
    elif op == "fp8_gemm":
        code, kind, key = FP8_GEMM, "scaled_mm", "fp8_gemm"
    else:
        return None
    return baseline_solution(definition, kind, _with_reference(definition, code), DESCRIPTIONS[key])
