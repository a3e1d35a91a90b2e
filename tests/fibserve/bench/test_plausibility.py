"""Roofline plausibility: the arithmetic and the device table."""

import pytest
import torch
from fibserve.bench.timing.roofline import check_plausibility, device_peak, workload_cost
from fibserve.trace import Definition

GEMM = Definition.model_validate(
    {
        "name": "gemm_n7168_k5120",
        "op_type": "gemm",
        "axes": {
            "M": {"type": "var"},
            "N": {"type": "const", "value": 7168},
            "K": {"type": "const", "value": 5120},
        },
        "inputs": {
            "A": {"shape": ["M", "K"], "dtype": "bfloat16"},
            "B": {"shape": ["N", "K"], "dtype": "bfloat16"},
        },
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "bfloat16"}},
        "reference": "def run(A, B):\n    return A @ B.T\n",
    }
)


def _meta(m):
    a = torch.empty((m, 5120), dtype=torch.bfloat16, device="meta")
    b = torch.empty((7168, 5120), dtype=torch.bfloat16, device="meta")
    c = torch.empty((m, 7168), dtype=torch.bfloat16, device="meta")
    return {"M": m, "N": 7168, "K": 5120}, {"A": a, "B": b}, {"C": c}


def test_device_table_prefers_specific_names():
    assert device_peak("NVIDIA H200").bandwidth == pytest.approx(4.8e12)
    assert device_peak("NVIDIA H100 80GB HBM3").bandwidth == pytest.approx(3.35e12)
    assert device_peak("NVIDIA H100 PCIe").bandwidth == pytest.approx(2.0e12)
    assert device_peak("NVIDIA GeForce RTX 4090") is None
    assert device_peak(None) is None


def test_gemm_cost_is_2mnk_and_all_bytes():
    axes, inputs, outputs = _meta(8192)
    flops, nbytes, family = workload_cost(GEMM, axes, inputs, outputs)
    assert flops == 2 * 8192 * 7168 * 5120
    assert nbytes == 2 * (8192 * 5120 + 7168 * 5120 + 8192 * 7168)
    assert family == "bf16"


def test_faster_than_the_h200_roofline_is_flagged():
    axes, inputs, outputs = _meta(8192)
    floor_ms = 2 * 8192 * 7168 * 5120 / 989e12 * 1e3  # compute bound: about 0.608 ms
    slow = check_plausibility("NVIDIA H200", 0.8, GEMM, axes, inputs, outputs)
    assert slow.floor_ms == pytest.approx(floor_ms)
    assert not slow.flagged
    fast = check_plausibility("NVIDIA H200", 0.3, GEMM, axes, inputs, outputs)
    assert fast.flagged and fast.achieved_tflops > 989


def test_small_m_is_memory_bound():
    axes, inputs, outputs = _meta(1)
    verdict = check_plausibility("NVIDIA H200", 1.0, GEMM, axes, inputs, outputs)
    assert verdict.floor_ms == pytest.approx(verdict.bytes / 4.8e12 * 1e3)


def test_unknown_device_or_op_is_never_flagged():
    axes, inputs, outputs = _meta(64)
    assert check_plausibility("Some GPU", 1e-9, GEMM, axes, inputs, outputs) is None
    other = GEMM.model_copy(update={"op_type": "rmsnorm"})
    assert check_plausibility("NVIDIA H200", 1e-9, other, axes, inputs, outputs) is None


def test_attention_decode_floor_uses_kv_lengths():
    attn = Definition.model_validate(
        {
            "name": "decode",
            "op_type": "gqa",
            "axes": {
                "batch": {"type": "var"},
                "num_qo_heads": {"type": "const", "value": 32},
                "head_dim": {"type": "const", "value": 128},
                "len_indptr": {"type": "var"},
            },
            "inputs": {
                "q": {"shape": ["batch", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
                "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
            },
            "outputs": {"o": {"shape": ["batch", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
            "reference": "def run(q, kv_indptr):\n    return q\n",
        }
    )
    inputs = {"q": torch.zeros(2, 32, 128, dtype=torch.bfloat16), "kv_indptr": torch.tensor([0, 100, 300])}
    flops, _, _ = workload_cost(
        attn, {"batch": 2, "num_qo_heads": 32, "head_dim": 128}, inputs, {"o": inputs["q"]}
    )
    assert flops == 2 * 32 * (128 + 128) * 300  # QK^T and PV of 300 (query, key) pairs, no causal tag


def test_dense_mha_of_the_bundled_set_has_a_compute_floor(trace_set):
    definition = trace_set.definition("mha_with_lse_d128")
    axes = definition.axis_values({"seq_len": 512})
    shape = (4, 48, 512, 128)
    inputs = {n: torch.empty(shape, dtype=torch.bfloat16, device="meta") for n in ("q", "k", "v")}
    flops, _, family = workload_cost(definition, axes, inputs, {})
    assert flops == 4 * 4 * 48 * 128 * 512 * 512 and family == "bf16"  # QK^T and PV, no mask
