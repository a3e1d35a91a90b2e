"""The exact, memory-bounded attention core of the GQA and MLA references (paged and ragged layouts).

Every GQA and MLA definition's reference source is :data:`ATTENTION_CORE` plus a ``run`` that walks the
batch and calls ``attend`` once per sequence with a ``fetch(start, stop)`` that returns that sequence's KV
tokens ``[start, stop)`` in fp32, read through the page table (:data:`PAGED_FETCH`) or sliced from ragged
tensors (:data:`RAGGED_FETCH`).

``attend`` is the definition of attention, in fp32 throughout (no TF32, PyTorch's default): scores
``q . k * sm_scale``, an optional causal mask aligned bottom-right (query ``i`` of ``q_len`` sees key ``j``
of ``kv_len`` when ``j <= i + kv_len - q_len``: the queries are the sequence's last tokens), the softmax, and
the base-2 log-sum-exp of the scaled scores (FlashInfer's convention: ``lse = log2(sum_j 2^(s_j log2 e))``).
A query that sees no key gets ``lse = -inf`` and a zero output. Query head ``h`` reads KV head
``h // (num_qo_heads // num_kv_heads)`` (grouped-query attention; MLA is the case of one KV head).

Memory: the KV tokens are read in blocks of :data:`KV_BLOCK` and merged with the usual running maximum and
sum (the online softmax, exact arithmetic in fp32, rounding aside), and queries in blocks sized so that a
block of scores holds at most ``SCORE_ELEMENTS`` fp32 values; so a call needs, besides its inputs and
outputs, one block of scores turned into probabilities in place (``SCORE_ELEMENTS * 4`` bytes, 256 MiB) and
its causal mask (a byte per score, twice), one fp32 block of keys and values, and a query block's fp32
accumulator, whatever the sequence lengths.
"""

from __future__ import annotations

KV_BLOCK = 4096
"""KV tokens read per block."""
SCORE_ELEMENTS = 1 << 26
"""Most fp32 scores held at once (256 MiB)."""

ATTENTION_CORE = f'''import math

import torch

KV_BLOCK = {KV_BLOCK}
SCORE_ELEMENTS = {SCORE_ELEMENTS}


def attend(q, fetch, kv_len, kv_heads, causal, sm_scale):
    """Exact attention of one sequence: q [q_len, Hq, Dqk] (any float dtype); fetch(start, stop) gives its KV
    tokens [start, stop) as fp32 keys [n, kv_heads, Dqk] and values [n, kv_heads, Dv]. Returns the output
    [q_len, Hq, Dv] and the base-2 LSE [q_len, Hq], both fp32."""
    q_len, heads, _ = q.shape
    group = heads // kv_heads
    block = max(1, min(q_len, SCORE_ELEMENTS // (heads * min(KV_BLOCK, max(kv_len, 1)))))
    outs, lses = [], []
    for q0 in range(0, q_len, block):
        q1 = min(q_len, q0 + block)
        o, lse = _attend_block(q[q0:q1], q0, q_len, fetch, kv_len, kv_heads, group, causal, float(sm_scale))
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def _attend_block(q, q0, q_len, fetch, kv_len, kv_heads, group, causal, sm_scale):
    rows, _, dim = q.shape
    # [rows, kv_heads * group, D] -> [kv_heads, group * rows, D]: row r is query q0 + r % rows of head group r // rows
    qg = q.float().reshape(rows, kv_heads, group, dim).permute(1, 2, 0, 3).reshape(kv_heads, group * rows, dim)
    position = (torch.arange(rows, device=q.device) + q0).repeat(group)[:, None] + (kv_len - q_len)
    stop = min(kv_len, q0 + rows + kv_len - q_len) if causal else kv_len
    best = torch.full((kv_heads, group * rows), float("-inf"), device=q.device)
    total = torch.zeros((kv_heads, group * rows), device=q.device)
    acc = None
    for k0 in range(0, max(stop, 0), KV_BLOCK):
        k1 = min(stop, k0 + KV_BLOCK)
        keys, values = fetch(k0, k1)
        scores = torch.matmul(qg, keys.permute(1, 2, 0)).mul_(sm_scale)
        if causal:
            seen = torch.arange(k0, k1, device=q.device)[None, :] <= position
            scores.masked_fill_(~seen, float("-inf"))
        new_best = torch.maximum(best, scores.amax(dim=-1))
        anchor = torch.where(torch.isinf(new_best), torch.zeros_like(new_best), new_best)
        kept = torch.exp(best - anchor)
        probs = scores.sub_(anchor[..., None]).exp_()
        total = total * kept + probs.sum(dim=-1)
        update = torch.matmul(probs, values.permute(1, 0, 2))
        acc = update if acc is None else acc.mul_(kept[..., None]).add_(update)
        best = new_best
    if acc is None:
        dv = fetch(0, 0)[1].shape[-1]
        acc = torch.zeros((kv_heads, group * rows, dv), device=q.device)
    seen_any = total > 0
    out = acc / torch.where(seen_any, total, torch.ones_like(total))[..., None]
    lse = torch.where(seen_any, (best + torch.log(total)) / math.log(2.0), torch.full_like(total, float("-inf")))
    out = out.reshape(kv_heads, group, rows, -1).permute(2, 0, 1, 3).reshape(rows, kv_heads * group, -1)
    return out, lse.reshape(kv_heads, group, rows).permute(2, 0, 1).reshape(rows, kv_heads * group)
'''
"""``attend``: the shared core (see the module docstring)."""

PAGED_FETCH = '''

def paged_fetch(caches, values_of, pages, page_size):
    """fetch(start, stop) over a paged cache: token t of the sequence is slot t % page_size of page
    pages[t // page_size]. caches are [num_pages, page_size, ...] tensors; values_of(tokens) maps their
    gathered tokens (a list, one [n, ...] tensor per cache) to (keys, values) in fp32."""

    def fetch(start, stop):
        tokens = torch.arange(start, stop, device=pages.device)
        where = pages[torch.div(tokens, page_size, rounding_mode="floor")], tokens % page_size
        return values_of([cache[where] for cache in caches])

    return fetch
'''
"""``paged_fetch``: KV tokens through a page table."""

RAGGED_FETCH = '''

def ragged_fetch(keys, values, start_of_sequence):
    """fetch(start, stop) over ragged keys and values [total, kv_heads, D]: rows from start_of_sequence on."""

    def fetch(start, stop):
        a, b = start_of_sequence + start, start_of_sequence + stop
        return keys[a:b].float(), values[a:b].float()

    return fetch
'''
"""``ragged_fetch``: KV tokens of contiguous ragged tensors."""
