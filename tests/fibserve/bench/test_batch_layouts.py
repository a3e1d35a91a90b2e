"""Definition-aware index inputs of paged and ragged attention (fibserve.bench.data.paged): on every GQA and
MLA workload of the bundled set, the page tables, indptr, indices and last-page lengths describe one real
batch with the workload's totals; lengths belong to the workload, page ids to the input set."""

from __future__ import annotations

import pytest
import torch
from fibserve.bench.data.inputs import InputError, _Context, generate_inputs
from fibserve.bench.data.paged import draw_layout, layout_seed, split, visible_pairs
from fibserve.datasets import default_root
from fibserve.trace import AxisConst
from fibserve.trace.trace_set import TraceSet

OP_TYPES = ("gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged")


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


def _attention(bundled: TraceSet) -> list[tuple]:
    return [
        (d, w)
        for d in bundled.definitions.values()
        if d.op_type in OP_TYPES
        for w in bundled.workloads_for(d.name)
    ]


def _layout(definition, workload):
    ctx = _Context(definition, definition.axis_values(workload.axes), torch.device("cpu"))
    return draw_layout(ctx, torch.Generator().manual_seed(layout_seed(workload.uuid)))


def test_every_attention_workload_gets_a_batch_with_its_totals(bundled: TraceSet) -> None:
    pairs = _attention(bundled)
    assert len(pairs) == 32
    for definition, workload in pairs:
        axes = definition.axis_values(workload.axes)
        layout = _layout(definition, workload)
        batch = axes["len_indptr"] - 1
        assert len(layout.q_lens) == len(layout.kv_lens) == batch, definition.name
        assert min(layout.q_lens) >= 1 and min(layout.kv_lens) >= 1
        if "total_q" in axes:
            assert sum(layout.q_lens) == axes["total_q"]
        if "total_tokens" in axes:
            assert sum(layout.q_lens) == sum(layout.kv_lens) == axes["total_tokens"]
        if "total_kv" in axes:
            assert sum(layout.kv_lens) == axes["total_kv"]
        if "num_kv_indices" in axes:
            assert sum(layout.pages) == axes["num_kv_indices"] <= axes["num_pages"]
            assert all(1 <= n <= layout.page_size for n in layout.last_page_lens)
        if "causal" in definition.tags:  # the queries are the sequence's last tokens: none is fully masked
            assert all(k >= q for q, k in zip(layout.q_lens, layout.kv_lens, strict=True)), definition.name
        else:
            assert set(layout.q_lens) == {1}  # decode


def test_lengths_are_heavy_tailed_like_a_serving_batch(bundled: TraceSet) -> None:
    definition = bundled.definition("gqa_paged_decode_h32_kv8_d128_ps1")
    layout = _layout(definition, bundled.workloads_for(definition.name)[0])
    lengths = sorted(layout.kv_lens)
    assert len(set(lengths)) > 50  # not one length repeated
    assert lengths[-1] > 3 * lengths[len(lengths) // 2]  # the longest sequence dwarfs the median


def _small(name: str, bundled: TraceSet):
    """The definition with 2 query heads (and 1 KV head) so that its cache fits a test."""
    definition = bundled.definition(name)
    axes = dict(definition.axes)
    for axis, value in (("num_qo_heads", 2), ("num_kv_heads", 1)):
        if axis in axes:
            axes[axis] = AxisConst(value=value)
    return definition.model_copy(update={"axes": axes})


@pytest.mark.parametrize(
    "name",
    [
        "gqa_paged_decode_h32_kv8_d128_ps1",
        "gqa_paged_decode_h20_kv4_d128_ps64",
        "gqa_paged_prefill_causal_h16_kv1_d128_ps64",
        "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
        "gqa_ragged_prefill_causal_h8_kv1_d256",
        "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1",
        "mla_ragged_prefill_causal_h16_qk192_vo128",
    ],
)
def test_generated_index_inputs_are_structurally_valid(bundled: TraceSet, name: str) -> None:
    definition = _small(name, bundled)
    workload = bundled.workloads_for(name)[0]
    axes = definition.axis_values(workload.axes)
    sets = [generate_inputs(definition, workload, k, secret=b"layout", device="cpu") for k in range(2)]
    layout = _layout(definition, workload)
    for inputs in sets:
        for indptr in (n for n in ("qo_indptr", "kv_indptr", "seq_indptr") if n in inputs):
            values = inputs[indptr]
            assert values.dtype == torch.int32 and values.numel() == axes["len_indptr"]
            assert int(values[0]) == 0 and bool((values[1:] > values[:-1]).all()), indptr
        if "qo_indptr" in inputs:
            queries = next(iter(inputs.values()))  # q, or MLA's q_nope
            assert int(inputs["qo_indptr"][-1]) == axes["total_q"] == queries.shape[0]
        if "kv_indices" in inputs:
            pages = inputs["kv_indices"]
            assert pages.dtype == torch.int32 and pages.numel() == int(inputs["kv_indptr"][-1])
            assert int(pages.min()) >= 0 and int(pages.max()) < axes["num_pages"]
            assert pages.unique().numel() == pages.numel()  # a page belongs to one sequence
        last = inputs.get("kv_last_page_len")
        if last is not None:
            assert last.tolist() == list(layout.last_page_lens)
        assert isinstance(inputs["sm_scale"], float)
    first, second = sets
    for name_ in ("qo_indptr", "kv_indptr", "seq_indptr", "kv_last_page_len"):
        if name_ in first:  # the batch is the workload's: the same in every input set
            assert torch.equal(first[name_], second[name_])
    if "kv_indices" in first:  # where it lives in the cache is the input set's
        assert not torch.equal(first["kv_indices"], second["kv_indices"])


def test_too_few_pages_for_the_batch_is_a_clear_input_error(bundled: TraceSet) -> None:
    definition = _small("gqa_paged_decode_h32_kv8_d128_ps1", bundled)
    workload = bundled.workloads_for("gqa_paged_decode_h32_kv8_d128_ps1")[0]
    cramped = workload.model_copy(update={"axes": {**workload.axes, "num_pages": 1000}})
    with pytest.raises(InputError, match="references 58966 pages but the cache holds 1000"):
        generate_inputs(definition, cramped, 0, secret=b"layout", device="cpu")
    short = workload.model_copy(update={"axes": {**workload.axes, "num_kv_indices": 10, "num_pages": 20}})
    with pytest.raises(InputError, match="cannot split 10 into 64 parts"):
        generate_inputs(definition, short, 0, secret=b"layout", device="cpu")


def test_split_is_exact_and_keeps_its_minimums() -> None:
    gen = torch.Generator().manual_seed(0)
    for total, parts in ((100, 7), (7, 7), (1_000_000, 3), (0, 0)):
        minimum = [1] * parts
        values = split(total, parts, minimum, gen)
        assert sum(values) == total and all(v >= 1 for v in values)


@pytest.mark.parametrize(("q_len", "kv_len"), [(1, 1), (1, 9), (5, 5), (5, 12), (7, 3), (64, 1000)])
def test_visible_pairs_count_the_bottom_right_causal_mask(q_len: int, kv_len: int) -> None:
    rows = torch.arange(q_len)[:, None] + (kv_len - q_len)
    mask = torch.arange(kv_len)[None, :] <= rows
    assert visible_pairs(q_len, kv_len, causal=True) == int(mask.sum())
    assert visible_pairs(q_len, kv_len, causal=False) == q_len * kv_len
