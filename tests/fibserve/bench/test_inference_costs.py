"""FLOPs and bytes of the inference ops for the roofline (fibserve.bench.timing.inference_costs), counted from
the workload's own index inputs."""

from __future__ import annotations

import pytest
import torch
from fibserve.bench.data.inputs import generate_inputs
from fibserve.bench.data.paged import visible_pairs
from fibserve.bench.timing.roofline import check_plausibility, workload_cost
from fibserve.datasets import default_root
from fibserve.trace import AxisConst
from fibserve.trace.trace_set import TraceSet


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


def _meta(definition, axes: dict, **given) -> dict:
    """Inputs on the meta device (shapes only) except the ones given."""
    out = {}
    for name, spec in definition.inputs.items():
        shape = definition.resolve_shape(name, axes)
        out[name] = given.get(
            name,
            0.1
            if shape is None
            else torch.empty(shape, dtype=getattr(torch, spec.dtype.value), device="meta"),
        )
    return out


def test_paged_decode_counts_every_token_of_every_sequence_and_only_those_pages(bundled: TraceSet) -> None:
    definition = bundled.definition("gqa_paged_decode_h32_kv8_d128_ps64")
    axes = definition.axis_values({"batch_size": 2, "len_indptr": 3, "num_kv_indices": 5, "num_pages": 1000})
    given = {
        "kv_indptr": torch.tensor([0, 2, 5], dtype=torch.int32),
        "kv_last_page_len": torch.tensor([10, 64], dtype=torch.int32),
    }
    flops, nbytes, family = workload_cost(definition, axes, _meta(definition, axes, **given), {})
    tokens = (64 + 10) + (2 * 64 + 64)
    assert flops == 2 * 32 * (128 + 128) * tokens and family == "bf16"
    token_bytes = 2 * 8 * 128 * 2  # k and v of one token, bf16
    small = 2 * 32 * 128 * 2 + 3 * 4 + 5 * 4 + 2 * 4  # q, kv_indptr, kv_indices, kv_last_page_len
    assert nbytes == small + token_bytes * tokens  # not the other 995 pages of the cache


def test_causal_prefill_counts_the_visible_pairs_and_mla_its_head_sizes(bundled: TraceSet) -> None:
    definition = bundled.definition("mla_paged_prefill_causal_h16_ckv512_kpe64_ps1")
    axes = definition.axis_values({"len_indptr": 3, "total_q": 5, "num_kv_indices": 12, "num_pages": 20})
    given = {
        "qo_indptr": torch.tensor([0, 2, 5], dtype=torch.int32),
        "kv_indptr": torch.tensor([0, 4, 12], dtype=torch.int32),
    }
    flops, _, _ = workload_cost(definition, axes, _meta(definition, axes, **given), {})
    pairs = (3 + 4) + (6 + 7 + 8)  # 2 queries over 4 keys, 3 over 8, bottom-right aligned
    assert flops == 2 * 16 * (576 + 512) * pairs


def test_gdn_and_fp8_gemm_costs(bundled: TraceSet) -> None:
    mtp = bundled.definition("gdn_mtp_qk8_v16_d128_k_last")
    axes = mtp.axis_values({"batch_size": 3, "seq_len": 4, "pool_size": 49})
    given = {"initial_state_indices": torch.tensor([5, 0, 9], dtype=torch.int32)}
    flops, nbytes, family = workload_cost(mtp, axes, _meta(mtp, axes, **given), {})
    assert flops == 7 * 3 * 4 * 16 * 128 * 128 and family == "bf16"
    slot = 16 * 128 * 128 * 4
    assert 3 * slot < nbytes < 4 * slot  # three slots of the 49-slot pool, and the small tensors
    gemm = bundled.definition("fp8_gemm_n7168_k16384")
    axes = gemm.axis_values({"M": 128})
    flops, nbytes, family = workload_cost(gemm, axes, _meta(gemm, axes), {})
    assert flops == 2 * 128 * 7168 * 16384 and family == "fp8"
    assert nbytes == 128 * 16384 + 128 * 128 * 4 + 7168 * 16384 + 56 * 128 * 4


def test_a_real_workload_gets_a_roofline_verdict(bundled: TraceSet) -> None:
    definition = bundled.definition("gqa_ragged_prefill_causal_h8_kv1_d256")
    small = definition.model_copy(update={"axes": definition.axes | {"num_qo_heads": AxisConst(value=2)}})
    workload = bundled.workloads_for(definition.name)[0]
    inputs = generate_inputs(small, workload, 0, secret=b"cost", device="cpu")
    axes = definition.axis_values(workload.axes)
    inputs["q"] = torch.empty((axes["total_q"], 8, 256), dtype=torch.bfloat16, device="meta")
    verdict = check_plausibility("NVIDIA H200", 1.0, definition, axes, inputs, {})
    assert verdict is not None and verdict.bound == "compute" and 0 < verdict.roofline_fraction < 1
    q_lens = (inputs["qo_indptr"][1:] - inputs["qo_indptr"][:-1]).tolist()
    kv_lens = (inputs["kv_indptr"][1:] - inputs["kv_indptr"][:-1]).tolist()
    pairs = sum(visible_pairs(q, k, causal=True) for q, k in zip(q_lens, kv_lens, strict=True))
    assert verdict.flops == 2 * 8 * (256 + 256) * pairs
