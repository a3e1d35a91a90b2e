"""Batches of paged and ragged attention (trusted side): index inputs that describe a real batch.

Random integers cannot stand in for ``kv_indptr`` or ``kv_indices``: a kernel reads the cache through them, so
they must describe sequences whose lengths add up to the workload's totals, with every page id inside the
cache. This module draws one :class:`BatchLayout` per workload and writes every index input from it, in the
FlashInfer layouts (FlashInfer-Bench op types ``gqa_paged``, ``gqa_ragged``, ``mla_paged``, ``mla_ragged``
and ``gdn``):

* ``qo_indptr`` [B + 1]: query offsets; sequence ``i`` owns query rows ``qo_indptr[i]:qo_indptr[i + 1]``
  (decode definitions have none: one query per sequence);
* paged KV (the definition has ``kv_indices``): ``kv_indptr`` [B + 1] are offsets into ``kv_indices``, the
  page ids of each sequence in order; sequence ``i`` holds ``kv_len_i = (pages_i - 1) * page_size +
  last_page_len_i`` tokens, and ``kv_last_page_len`` (or ``last_page_len``) [B] says how many slots of its
  last page are used (1 to page_size). Page ids are distinct and drawn from ``[0, num_pages)``;
* ragged KV (no ``kv_indices``): ``kv_indptr`` [B + 1] are token offsets into ``k`` and ``v``;
* ``seq_indptr`` and ``cu_seqlens`` [B + 1]: one set of offsets shared by queries and keys (MLA total
  prefill, GDN prefill);
* ``kv_len_arr`` / ``kv_lens`` [B]: each sequence's KV token count.

The lengths belong to the workload, not to the input set: they are drawn from a seed of the workload uuid
alone (:func:`layout_seed`), so every input set of a workload has the same batch (and the same FLOPs, which
the roofline reads from input set 0), while the page ids and all values change with each input set (drawn
from the evaluation's secret, like every other random input). Lengths are heavy-tailed like a serving batch
(weights ``exp(N(0, 1))``, so a few sequences hold much of the total) and split the totals exactly. For
causal prefill every sequence gets at least as many KV tokens as queries (``kv_len_i >= q_len_i``: the
queries are the last ``q_len_i`` tokens of the sequence, the rest is its cached prefix), so no query row is
fully masked.

Where the totals come from: ``B`` is the length of an indptr minus one; the number of pages referenced is the
length of ``kv_indices``; the query and ragged KV totals are the axes named by constraints ``AXIS ==
NAME[-1].item()``, or the first dimension of ``q`` and ``k``. A workload whose totals cannot form such a batch
(fewer pages than sequences, fewer KV tokens than queries) is an :class:`LayoutError` naming the numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from fibserve.trace import Definition

from fibserve.bench.dtypes import TORCH_DTYPES

PAGE_LENGTH_NAMES = ("kv_last_page_len", "last_page_len")
"""Names of the per-sequence ``last page length`` input, public spellings first."""
KV_LENGTH_NAMES = ("kv_len_arr", "kv_lens")
"""Names of a per-sequence KV token count input."""
SHARED_INDPTR_NAMES = ("seq_indptr", "cu_seqlens")
"""Offsets shared by queries and keys (one sequence length each)."""
LAYOUT_NAMES = frozenset(
    {"qo_indptr", "kv_indptr", "kv_indices", *PAGE_LENGTH_NAMES, *KV_LENGTH_NAMES, *SHARED_INDPTR_NAMES}
)
"""Every input this module writes."""


class LayoutError(ValueError):
    """The workload's totals cannot describe a batch (a task-level problem: fix the workload's axes)."""


class LayoutSource(Protocol):
    """What the layout needs from the input generator: the definition, its axis values, tensor shapes and the
    totals an indptr must reach (:class:`fibserve.bench.data.inputs` provides it)."""

    definition: Definition
    axes: dict[str, int]

    def shape(self, name: str) -> tuple[int, ...] | None: ...

    def total_for_indptr(self, name: str) -> int: ...

    def num_pages(self, name: str) -> int: ...


@dataclass(frozen=True)
class BatchLayout:
    """One batch: per sequence, its query and KV token counts and (paged) its page count."""

    q_lens: tuple[int, ...]
    """Query tokens of each sequence (1 each for decode)."""
    kv_lens: tuple[int, ...]
    """KV tokens of each sequence (cached prefix plus its queries for prefill; the context for decode)."""
    page_size: int = 1
    """Tokens per page (1 for ragged layouts)."""

    @property
    def pages(self) -> tuple[int, ...]:
        """Pages each sequence occupies: ``ceil(kv_len / page_size)``."""
        return tuple(-(-n // self.page_size) for n in self.kv_lens)

    @property
    def last_page_lens(self) -> tuple[int, ...]:
        """Used slots of each sequence's last page, 1..page_size."""
        return tuple(n - (p - 1) * self.page_size for n, p in zip(self.kv_lens, self.pages, strict=True))


def layout_seed(workload_uuid: str) -> int:
    """A 63-bit seed from the workload uuid alone (the batch's lengths are part of the workload)."""
    digest = hashlib.sha256(b"ptxbench-batch-layout\x00" + workload_uuid.encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def split(total: int, parts: int, minimum: list[int], gen: torch.Generator) -> list[int]:
    """``parts`` integers, each at least its ``minimum``, summing to ``total``, heavy-tailed: the surplus
    ``total - sum(minimum)`` is shared in proportion to weights ``exp(N(0, 1))`` (largest remainders round it
    exactly).

    Raises:
        LayoutError: ``total`` is below ``sum(minimum)``.
    """
    surplus = total - sum(minimum)
    if surplus < 0:
        raise LayoutError(f"cannot split {total} into {parts} parts of at least {sum(minimum)} in all")
    if parts == 0:
        return []
    weights = torch.randn(parts, generator=gen, dtype=torch.float64).exp()
    shares = weights / weights.sum() * surplus
    whole = shares.floor().to(torch.int64)
    short = surplus - int(whole.sum())
    order = torch.argsort(shares - whole, descending=True)[:short]
    whole[order] += 1
    return [m + int(w) for m, w in zip(minimum, whole.tolist(), strict=True)]


def _batch_size(source: LayoutSource, present: list[str]) -> int:
    for name in ("qo_indptr", "kv_indptr", *SHARED_INDPTR_NAMES):
        if name in present:
            return source.shape(name)[0] - 1
    raise LayoutError("the definition has no indptr input to take the batch size from")


def draw_layout(source: LayoutSource, gen: torch.Generator) -> BatchLayout:
    """The workload's batch (see the module docstring), lengths drawn with ``gen``.

    Raises:
        LayoutError: the totals cannot describe a batch (the message gives them).
        fibserve.bench.data.inputs.InputError: a total cannot be told (no constraint names it).
    """
    inputs = source.definition.inputs
    present = [n for n in inputs if n in LAYOUT_NAMES]
    batch = _batch_size(source, present)
    if batch < 0:
        raise LayoutError("an indptr of length 0 describes no batch; give it length batch_size + 1")
    shared = next((n for n in SHARED_INDPTR_NAMES if n in inputs), None)
    if shared is not None:
        lens = split(source.total_for_indptr(shared), batch, [1] * batch, gen)
        return BatchLayout(tuple(lens), tuple(lens))
    q_lens = (
        split(source.total_for_indptr("qo_indptr"), batch, [1] * batch, gen)
        if "qo_indptr" in inputs
        else [1] * batch
    )
    if "kv_indices" in inputs:
        page_size = source.axes.get("page_size", 1)
        needed = [max(1, -(-q // page_size)) for q in q_lens]
        pages = split(source.shape("kv_indices")[0], batch, needed, gen)
        kv_lens = [_tokens_in(p, q, page_size, gen) for p, q in zip(pages, q_lens, strict=True)]
        return BatchLayout(tuple(q_lens), tuple(kv_lens), page_size)
    total_kv = source.total_for_indptr("kv_indptr")
    if total_kv < sum(q_lens):
        raise LayoutError(f"{total_kv} KV tokens cannot hold {sum(q_lens)} queries (kv_len >= q_len each)")
    prefixes = split(total_kv - sum(q_lens), batch, [0] * batch, gen)
    return BatchLayout(tuple(q_lens), tuple(q + p for q, p in zip(q_lens, prefixes, strict=True)))


def _tokens_in(pages: int, queries: int, page_size: int, gen: torch.Generator) -> int:
    """A KV length that fills ``pages`` pages (the last one 1..page_size slots) and holds ``queries``."""
    low = max(queries, (pages - 1) * page_size + 1)
    high = pages * page_size
    return low + int(torch.randint(0, high - low + 1, (1,), generator=gen))


def _offsets(lengths: tuple[int, ...] | list[int]) -> list[int]:
    return [0, *torch.tensor(list(lengths), dtype=torch.int64).cumsum(0).tolist()]


def layout_inputs(
    source: LayoutSource,
    wanted: set[str],
    generator_for: Callable[[str], torch.Generator],
    layout_gen: torch.Generator,
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """The index inputs among ``wanted`` (names the workload draws at random) that this module writes, as
    tensors of the definition's dtypes; empty when the definition has none.

    Args:
        source: the definition, axes and totals.
        wanted: input names to produce.
        generator_for: an input name -> the generator of this input set (page ids).
        layout_gen: the workload's generator (:func:`layout_seed`), for the lengths.
        device: where the tensors are made.

    Raises:
        LayoutError: see :func:`draw_layout`, or more pages referenced than the cache holds.
    """
    names = [n for n in source.definition.inputs if n in LAYOUT_NAMES and n in wanted]
    if not names:
        return {}
    layout = draw_layout(source, layout_gen)
    paged = "kv_indices" in source.definition.inputs
    values: dict[str, list[int] | torch.Tensor] = {}
    for name in names:
        if name == "qo_indptr":
            values[name] = _offsets(layout.q_lens)
        elif name == "kv_indptr":
            values[name] = _offsets(layout.pages if paged else layout.kv_lens)
        elif name in SHARED_INDPTR_NAMES:
            values[name] = _offsets(layout.q_lens)
        elif name in PAGE_LENGTH_NAMES:
            values[name] = list(layout.last_page_lens)
        elif name in KV_LENGTH_NAMES:
            values[name] = list(layout.kv_lens)
        else:
            values[name] = _page_ids(source, sum(layout.pages), generator_for(name), device)
    out = {}
    for name, value in values.items():
        dtype = _torch_int(source.definition.inputs[name].dtype.value)
        out[name] = (value if isinstance(value, torch.Tensor) else torch.tensor(value, device=device)).to(
            dtype
        )
    return out


def _page_ids(source: LayoutSource, count: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """``count`` distinct page ids from ``[0, num_pages)``, in random order (a real cache's pages are
    scattered)."""
    pages = source.num_pages("kv_indices")
    if count > pages:
        raise LayoutError(
            f"the batch references {count} pages but the cache holds {pages} (num_pages); raise num_pages"
        )
    return torch.randperm(pages, generator=gen, device=gen.device)[:count].to(device)


def _torch_int(name: str) -> torch.dtype:
    dtype = TORCH_DTYPES.get(name)
    if dtype is None or dtype.is_floating_point:
        raise LayoutError(f"an index input must have an integer dtype, not {name}")
    return dtype


def visible_pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """How many (query, key) pairs attend in one sequence: ``q_len * kv_len`` without a mask; with the
    bottom-right causal mask (query ``i`` sees keys ``j <= i + kv_len - q_len``) the sum over queries of
    ``max(0, i + 1 + kv_len - q_len)`` (never above ``kv_len``)."""
    if not causal:
        return q_len * kv_len
    first = max(0, q_len - kv_len)  # the queries before this one see no key
    rows = q_len - first
    return (first + 1 + kv_len - q_len + kv_len) * rows // 2
