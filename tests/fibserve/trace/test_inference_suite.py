"""The inference-op suite of the bundled trace set: every GQA, MLA and GDN problem of the PTXBench lists with
its public name and workload uuids, the FP8 block-scaled GEMMs, and references that agree with independent
formulations on tiny shapes (a dense softmax per sequence for attention, the public GDN recurrence step by
step, dequantize-then-matmul for FP8) and stay within their memory bound."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from fibserve.bench.data.inputs import generate_inputs
from fibserve.bench.data.reference import load_reference
from fibserve.datasets import default_root
from fibserve.datasets import gqa as gqa_module
from fibserve.datasets.ragged_attention import KV_BLOCK, SCORE_ELEMENTS
from fibserve.trace import AxisConst, RandomInput, ScalarInput, Workload
from fibserve.trace.trace_set import TraceSet
from trace_helpers import shared

SECRET = b"inference-suite"


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


def test_every_inference_problem_of_the_ptxbench_lists_is_bundled(bundled: TraceSet) -> None:
    problems = shared("ptxbench-problems")
    rows = list(csv.DictReader((problems / "single_op_problems.csv").open()))
    assert len(rows) == 32 and sum(r["definition"].startswith("gqa_") for r in rows) == 29
    for row in rows:
        trace = bundled.workload_trace(row["workload_uuid"])
        assert trace.definition == row["definition"]
    gdn_rows = list(csv.DictReader((problems / "gdn_problems.csv").open()))
    for row in gdn_rows:
        workload = bundled.workload_trace(row["workload_uuid"])
        assert workload.definition == row["definition_name"]
        axes = workload.workload.axes
        assert axes.get("total_seq_len", axes.get("seq_len", 1)) == int(row["seq_len"])
    names = {r["definition"] for r in rows} | {r["definition_name"] for r in gdn_rows}
    assert len(names) == 32 + 6
    fp8 = [d for d in bundled.definitions.values() if d.op_type == "fp8_gemm"]
    assert len(fp8) == 6 and all(len(bundled.workloads_for(d.name)) == 3 for d in fp8)


def test_the_public_records_totals_are_kept_where_they_are_known(bundled: TraceSet) -> None:
    decode = bundled.workload("5444fc56-b282-4228-b233-ee170d1bd127").axes
    assert decode == {"batch_size": 64, "len_indptr": 65, "num_kv_indices": 58966, "num_pages": 68237}
    prefill = bundled.workload("820d93c0-2670-4ee2-8b19-864e471836a3").axes
    assert (prefill["total_q"], prefill["num_kv_indices"], prefill["num_pages"]) == (969, 969, 4166)
    assert [w.axes["batch_size"] for w in bundled.workloads_for("gdn_decode_qk4_v8_d128_k_last")] == [
        1, 4, 8, 16, 32, 64
    ]  # fmt: skip


@pytest.mark.parametrize("op_type", ["gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged", "gdn", "fp8_gemm"])
def test_every_definition_has_a_labelled_baseline_and_scalar_scales(bundled: TraceSet, op_type: str) -> None:
    definitions = [d for d in bundled.definitions.values() if d.op_type == op_type]
    assert definitions
    for definition in definitions:
        baseline = bundled.baseline_for(definition.name)
        assert baseline is not None and baseline.spec.language.value == "python"
        assert baseline.description and not baseline.spec.destination_passing_style
        for workload in bundled.workloads_for(definition.name):
            scales = {n: s for n, s in workload.inputs.items() if n in ("sm_scale", "scale")}
            assert all(s.type == "scalar" and 0 < s.value < 0.2 for s in scales.values())
    if op_type == "gdn":
        assert "Not a fast kernel" in bundled.baseline_for(definitions[0].name).description


def _small(definition, **consts):
    axes = dict(definition.axes) | {k: AxisConst(value=v) for k, v in consts.items()}
    return definition.model_copy(update={"axes": axes})


def _inputs(definition, axes: dict, scale: float) -> dict:
    inputs = {
        n: ScalarInput(value=scale) if n in ("sm_scale", "scale") else RandomInput()
        for n in definition.inputs
    }
    workload = Workload(uuid=f"tiny-{definition.name}", axes=axes, inputs=inputs)
    return generate_inputs(definition, workload, 0, secret=SECRET, device="cpu")


def _dense(q, keys, values, causal, scale):
    """Independent formulation: the whole score matrix of one sequence, torch.softmax, logsumexp / ln 2."""
    group = q.shape[1] // keys.shape[1]
    k, v = keys.float().repeat_interleave(group, 1), values.float().repeat_interleave(group, 1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if causal:
        shift = k.shape[0] - q.shape[0]
        hidden = torch.arange(k.shape[0])[None, :] > torch.arange(q.shape[0])[:, None] + shift
        scores = scores.masked_fill(hidden, float("-inf"))
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
    return out, (torch.logsumexp(scores, dim=-1) / math.log(2.0)).t()


def _sequences(inputs: dict):
    """(query rows, keys, values) of each sequence, read the simple way from the index inputs."""
    kv_indptr = inputs.get("kv_indptr", inputs.get("seq_indptr"))
    qo = inputs.get("qo_indptr", inputs.get("seq_indptr"))
    caches = [inputs[n] for n in ("k_cache", "v_cache", "ckv_cache", "kpe_cache") if n in inputs]
    for b in range(kv_indptr.numel() - 1):
        k0, k1 = int(kv_indptr[b]), int(kv_indptr[b + 1])
        rows = slice(int(qo[b]), int(qo[b + 1])) if qo is not None else slice(b, b + 1)
        if not caches:
            yield rows, inputs["k"][k0:k1], inputs["v"][k0:k1]
            continue
        pages = inputs["kv_indices"][k0:k1].long()
        tokens = [c[pages].reshape(-1, *c.shape[2:]) for c in caches]
        if "kv_last_page_len" in inputs:
            length = (pages.numel() - 1) * caches[0].shape[1] + int(inputs["kv_last_page_len"][b])
            tokens = [t[:length] for t in tokens]
        if "ckv_cache" in inputs:  # absorbed MLA: keys (ckv, kpe), values ckv, one KV head
            yield rows, torch.cat(tokens, dim=-1)[:, None], tokens[0][:, None]
        else:
            yield rows, tokens[0], tokens[1]


ATTENTION_CASES = [
    ("gqa_paged_decode_h32_kv8_d128_ps1", {"batch_size": 5, "len_indptr": 6, "num_kv_indices": 90, "num_pages": 120}),
    ("gqa_paged_decode_h20_kv4_d128_ps64", {"batch_size": 4, "len_indptr": 5, "num_kv_indices": 9, "num_pages": 12}),
    ("gqa_paged_prefill_causal_h24_kv8_d128_ps1", {"len_indptr": 4, "total_q": 30, "num_kv_indices": 80, "num_pages": 99}),
    (
        "gqa_paged_prefill_causal_h16_kv2_d128_ps64",
        {"batch_size": 3, "len_indptr": 4, "total_q": 70, "num_kv_indices": 6, "num_pages": 9},
    ),
    ("gqa_ragged_prefill_causal_h8_kv1_d256", {"len_indptr": 4, "total_q": 25, "total_kv": 60}),
    ("mla_paged_decode_h16_ckv512_kpe64_ps1", {"batch_size": 3, "len_indptr": 4, "num_kv_indices": 50, "num_pages": 64}),
    ("mla_paged_prefill_causal_h16_ckv512_kpe64_ps1", {"len_indptr": 3, "total_q": 12, "num_kv_indices": 40, "num_pages": 41}),
    ("mla_ragged_prefill_causal_h16_qk192_vo128", {"len_indptr": 3, "total_tokens": 33}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "axes"), ATTENTION_CASES, ids=[c[0] for c in ATTENTION_CASES])
def test_attention_references_agree_with_a_dense_softmax_per_sequence(bundled: TraceSet, name, axes) -> None:
    definition = bundled.definition(name)
    if "num_kv_heads" in definition.axes:  # fewer heads, same grouping: the reference does not depend on them
        group = definition.const_axes["num_qo_heads"] // definition.const_axes["num_kv_heads"]
        definition = _small(definition, num_qo_heads=2 * group, num_kv_heads=2)
    inputs = _inputs(definition, axes, scale=0.07)
    output, lse = load_reference(definition)(*inputs.values())
    assert output.dtype == torch.bfloat16 and lse.dtype == torch.float32
    queries = torch.cat((inputs["q_nope"], inputs["q_pe"]), dim=-1) if "q_nope" in inputs else inputs["q"]
    causal = "causal" in definition.tags
    for rows, keys, values in _sequences(inputs):
        expected, expected_lse = _dense(queries[rows], keys, values, causal, 0.07)
        torch.testing.assert_close(output[rows], expected.to(torch.bfloat16), atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(lse[rows], expected_lse, atol=1e-4, rtol=1e-5)


def _public_step(state_vk, q, k, v, g, beta, scale):
    """The public reference's update, written its way ([K, V] state, new_v blended with old_v)."""
    h = g * state_vk.t()
    old_v = k @ h
    new_v = beta * v + (1 - beta) * old_v
    h = h - torch.outer(k, old_v) + torch.outer(k, new_v)
    return scale * (q @ h), h.t()


def _gates(inputs):
    g = torch.exp(-torch.exp(inputs["A_log"]) * F.softplus(inputs["a"].float() + inputs["dt_bias"]))
    return g, torch.sigmoid(inputs["b"].float())


@pytest.mark.parametrize("heads", [(4, 8), (8, 16)])
def test_gdn_decode_matches_the_public_recurrence(bundled: TraceSet, heads) -> None:
    definition = bundled.definition(f"gdn_decode_qk{heads[0]}_v{heads[1]}_d128_k_last")
    inputs = _inputs(definition, {"batch_size": 2}, scale=0.088)
    output, new_state = load_reference(definition)(*inputs.values())
    g, beta = _gates(inputs)
    ratio = heads[1] // heads[0]
    for b in range(2):
        for h in range(heads[1]):
            q, k = inputs["q"][b, 0, h // ratio].float(), inputs["k"][b, 0, h // ratio].float()
            o, s = _public_step(
                inputs["state"][b, h], q, k, inputs["v"][b, 0, h].float(), g[b, 0, h], beta[b, 0, h], 0.088
            )
            torch.testing.assert_close(new_state[b, h], s, atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(output[b, 0, h], o.to(torch.bfloat16), atol=1e-4, rtol=1e-2)


def test_gdn_mtp_and_prefill_are_decode_token_by_token(bundled: TraceSet) -> None:
    decode = load_reference(bundled.definition("gdn_decode_qk4_v8_d128_k_last"))
    mtp = bundled.definition("gdn_mtp_qk4_v8_d128_k_last")
    inputs = _inputs(mtp, {"batch_size": 2, "seq_len": 3, "pool_size": 5}, scale=0.088)
    output, final = load_reference(mtp)(*inputs.values())
    assert final.shape == (2, 8, 128, 128)
    gates = [inputs[n] for n in ("A_log", "a", "dt_bias", "b")]
    for b in range(2):
        state = inputs["initial_state"][int(inputs["initial_state_indices"][b])][None]
        for t in range(3):
            step = [x[b : b + 1, t : t + 1] for x in (inputs["q"], inputs["k"], inputs["v"])]
            o, state = decode(
                *step,
                state,
                gates[0],
                gates[1][b : b + 1, t : t + 1],
                gates[2],
                gates[3][b : b + 1, t : t + 1],
                0.088,
            )
            torch.testing.assert_close(output[b, t], o[0, 0], atol=1e-4, rtol=1e-2)
        torch.testing.assert_close(final[b], state[0], atol=1e-6, rtol=1e-5)
    prefill = bundled.definition("gdn_prefill_qk4_v8_d128_k_last")
    inputs = _inputs(prefill, {"total_seq_len": 11, "num_seqs": 3, "len_cu_seqlens": 4}, scale=0.088)
    output, final = load_reference(prefill)(*inputs.values())
    cu = inputs["cu_seqlens"]
    for i in range(3):
        state = inputs["state"][i : i + 1]
        for t in range(int(cu[i]), int(cu[i + 1])):
            step = [x[t : t + 1, None] for x in (inputs["q"], inputs["k"], inputs["v"])]
            a, b_ = inputs["a"][t : t + 1, None], inputs["b"][t : t + 1, None]
            o, state = decode(*step, state, inputs["A_log"], a, inputs["dt_bias"], b_, 0.088)
            torch.testing.assert_close(output[t], o[0, 0], atol=1e-4, rtol=1e-2)
        torch.testing.assert_close(final[i], state[0], atol=1e-6, rtol=1e-5)


def test_fp8_gemm_reference_is_the_dequantized_product(bundled: TraceSet) -> None:
    definition = bundled.definition("fp8_gemm_n2112_k7168")
    definition = definition.model_copy(
        update={"axes": definition.axes | {"K": AxisConst(value=384), "num_k_blocks": AxisConst(value=3)}}
    )
    inputs = _inputs(definition, {"M": 33}, scale=1.0)
    c = load_reference(definition)(*inputs.values())
    a = inputs["A"].float() * inputs["A_scale"].repeat_interleave(128, 1)
    b = inputs["B"].float() * inputs["B_scale"].repeat_interleave(128, 0)[:2112].repeat_interleave(128, 1)
    assert c.dtype == torch.bfloat16 and c.shape == (33, 2112)
    exact = a.double() @ b.double().t()  # within half a bf16 step (2^-9) of the reference, plus fp32 sums
    torch.testing.assert_close(c.double(), exact, atol=1e-3, rtol=2**-8)


PEAK_SCRIPT = textwrap.dedent(
    """
    import json, re, sys, torch
    from fibserve.datasets import gqa
    from fibserve.bench.data.reference import load_reference
    torch.set_num_threads(1)
    definition = gqa.ragged_prefill((4, 1, 16))
    source = definition.reference.replace("KV_BLOCK = {kv_block}", "KV_BLOCK = 256").replace(
        "SCORE_ELEMENTS = {score_elements}", "SCORE_ELEMENTS = 65536")
    run = load_reference(definition.model_copy(update={{"name": "peak", "reference": source}}))
    n = 2048
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(n, 4, 16, generator=gen).bfloat16()
    k, v = (torch.randn(n, 1, 16, generator=gen).bfloat16() for _ in range(2))
    indptr = torch.tensor([0, n], dtype=torch.int32)
    run(q[:64], k[:64], v[:64], torch.tensor([0, 64], dtype=torch.int32), torch.tensor([0, 64], dtype=torch.int32), 0.25)
    def kib(field):
        return int(re.search(field + r":\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    def growth(call):  # peak resident bytes above the current ones while call runs (clear_refs 5: reset VmHWM)
        open("/proc/self/clear_refs", "w").write("5")
        before = kib("VmRSS")
        kept = call()
        return (kib("VmHWM") - before) * 1024, kept
    chunked, _ = growth(lambda: run(q, k, v, indptr, indptr, 0.25))
    dense, scores = growth(lambda: torch.einsum("qhd,khd->hqk", q.float(), k.float().expand(-1, 4, -1)).softmax(dim=-1))
    print(json.dumps({{"chunked": chunked, "dense": dense, "scores": scores.numel() * 4}}))
    """
).format(kv_block=KV_BLOCK, score_elements=SCORE_ELEMENTS)


@pytest.mark.slow
def test_the_attention_reference_is_memory_bounded_measured_on_a_long_sequence() -> None:
    """One causal sequence of 2048 tokens with the reference's blocks scaled down (256 keys, 65536 scores):
    its peak memory grows by a few MiB (2.2 MiB measured), while the dense score matrix of the same sequence and
    its softmax take 128 MiB (each peak measured from a reset of VmHWM through /proc/self/clear_refs: the
    process's high-water mark from importing torch once hid the dense matrix). At full size the same bound is one block of 2^26 fp32 scores, its mask and one KV
    block: under 0.5 GiB (docs/inference-suite.md), whatever the sequence lengths."""
    result = subprocess.run([sys.executable, "-c", PEAK_SCRIPT], capture_output=True, text=True, check=True)
    peak = json.loads(result.stdout)
    assert peak["scores"] == 4 * 2048 * 2048 * 4
    assert peak["dense"] > 0.75 * peak["scores"]  # the measurement sees a dense score matrix
    assert peak["chunked"] < 8 * 2**20, peak


def test_the_block_sizes_bound_the_full_size_reference() -> None:
    rows = SCORE_ELEMENTS // (32 * KV_BLOCK)  # query rows per block of gqa h32 with a sequence over 4096 keys
    assert rows == 512 and 32 * rows * KV_BLOCK * 4 == 2**28
    assert "SCORE_ELEMENTS = 67108864" in gqa_module.ragged_prefill((32, 8, 128)).reference
