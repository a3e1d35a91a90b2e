"""The attention suite of the bundled trace set: public names and uuids, references that agree with an
independent formulation (torch SDPA math and autograd, on CPU in float32), inputs that are valid for each
definition (FP8 from scaled bf16 values, the backward's o and lse from the forward), and fully masked rows
whose LSE is -inf and matches only -inf."""

from __future__ import annotations

import csv
import math

import pytest
import torch
from fibserve.bench.correctness.compare import compare_tensors
from fibserve.bench.data.inputs import generate_inputs
from fibserve.bench.data.reference import load_reference, reference_namespace
from fibserve.datasets import default_root
from fibserve.datasets.attention import BACKWARD_REFERENCE, QKV, ROWS
from fibserve.trace import AxisConst, AxisVar, Definition, RandomInput, TensorSpec, Workload
from fibserve.trace.trace_set import TraceSet
from trace_helpers import shared

FORWARD = [f"mha_with_lse_d{d}{c}" for d in (64, 96, 128, 256) for c in ("", "_causal")]
BACKWARD = [f"mha_bwd_d{d}{c}" for d in (64, 96, 128) for c in ("", "_causal")]
FP8 = [f"fp8_mha_with_lse_d{d}{c}" for d in (64, 96, 128, 256) for c in ("", "_causal")]


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


def _small(definition: Definition, batch: int = 1, heads: int = 2) -> Definition:
    """The definition with small const batch and head counts (the reference does not depend on them)."""
    axes = {**definition.axes, "batch_size": AxisConst(value=batch), "num_heads": AxisConst(value=heads)}
    return definition.model_copy(update={"axes": axes})


def _inputs(definition: Definition, seq_len: int, input_set: int = 0) -> dict:
    workload = Workload(
        uuid="tiny", axes={"seq_len": seq_len}, inputs={n: RandomInput() for n in definition.inputs}
    )
    return generate_inputs(definition, workload, input_set, secret=b"attention", device="cpu")


def _math_attention(q, k, v, causal):
    """Independent formulation: torch's SDPA math path in float32, and the LSE from the score matrix."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(
            torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).triu(1), float("-inf")
        )
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return o, torch.logsumexp(scores, dim=-1)


def test_every_attention_problem_of_the_ptxbench_lists_is_a_bundled_workload(bundled: TraceSet) -> None:
    problems = shared("ptxbench-problems")
    names = set(FORWARD + BACKWARD + FP8)
    assert names <= set(bundled.definitions)
    seen = 0
    for file in ("h100_reference_latency.csv", "mha_problems.csv", "mha_bwd_problems.csv"):
        for row in csv.DictReader((problems / file).open()):
            trace = bundled.workload_trace(row["workload_uuid"])
            assert trace.definition == row["definition_name"] in names
            assert trace.workload.axes == {"seq_len": int(row["seq_len"])}
            seen += 1
    for row in csv.DictReader((problems / "fp8_mha_problems.csv").open()):
        assert bundled.workload_trace(row["workload_uuid"]).definition == row["definition_name"]
    assert seen == 132 + 14 + 24
    for name in names:
        seq_lens = sorted(w.axes["seq_len"] for w in bundled.workloads_for(name))
        assert seq_lens == [512, 1024, 2048, 4096, 8192, 16384], name


def test_every_definition_names_a_baseline_solution_of_the_set(bundled: TraceSet) -> None:
    for name, definition in bundled.definitions.items():
        baseline = bundled.baseline_for(name)
        assert baseline is not None and baseline.name == definition.baseline, name
        assert baseline.spec.language.value == "python" and not baseline.spec.destination_passing_style
    assert "cudnn" in bundled.baseline_for("mha_with_lse_d128").name
    assert "cudnn_sdpa_backward" in bundled.baseline_for("mha_bwd_d96_causal").name
    assert "Not an FP8 kernel" in bundled.baseline_for("fp8_mha_with_lse_d256").description
    assert bundled.baseline_for("gemm_n7168_k5120").name.endswith("torch_matmul")


@pytest.mark.parametrize("name", FORWARD)
def test_forward_reference_agrees_with_sdpa_math_in_float32(bundled: TraceSet, name: str) -> None:
    definition = bundled.definition(name)
    head_dim = definition.const_axes["head_dim"]
    generator = torch.Generator().manual_seed(head_dim)
    q, k, v = (torch.randn(2, 3, 37, head_dim, generator=generator) for _ in range(3))
    o, lse = load_reference(definition)(q, k, v)
    expected_o, expected_lse = _math_attention(q, k, v, "causal" in definition.tags)
    assert o.dtype == lse.dtype == torch.float32 and lse.shape == (2, 3, 37)
    torch.testing.assert_close(o, expected_o, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, expected_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", BACKWARD)
def test_backward_reference_agrees_with_autograd_in_float32(bundled: TraceSet, name: str) -> None:
    definition = bundled.definition(name)
    causal = "causal" in definition.tags
    head_dim = definition.const_axes["head_dim"]
    generator = torch.Generator().manual_seed(head_dim)
    q, k, v, do = (torch.randn(1, 2, 29, head_dim, generator=generator) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal).backward(do)
    derived = reference_namespace(definition)["derive_inputs"](q, k, v)
    dq, dk, dv = load_reference(definition)(q, k, v, derived["o"], derived["lse"], do)
    for got, leaf in zip((dq, dk, dv), leaves, strict=True):
        torch.testing.assert_close(got, leaf.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", FP8)
def test_fp8_reference_is_the_forward_of_the_dequantized_inputs(bundled: TraceSet, name: str) -> None:
    definition = _small(bundled.definition(name))
    forward = bundled.definition(name.removeprefix("fp8_"))
    inputs = _inputs(definition, seq_len=33)
    o, lse = load_reference(definition)(*inputs.values())
    real = [inputs[n].float() * inputs[f"{n}_scale"][:, :, None, None] for n in ("q", "k", "v")]
    expected_o, expected_lse = load_reference(forward)(*real)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    torch.testing.assert_close(o, expected_o.to(torch.bfloat16))
    torch.testing.assert_close(lse, expected_lse)


@pytest.mark.parametrize("name", ["fp8_mha_with_lse_d64", "fp8_mha_with_lse_d256_causal"])
def test_fp8_inputs_are_scaled_bf16_normals_per_batch_and_head(bundled: TraceSet, name: str) -> None:
    definition = _small(bundled.definition(name), batch=2, heads=3)
    inputs = _inputs(definition, seq_len=64)
    for tensor in ("q", "k", "v"):
        quantized, scale = inputs[tensor], inputs[f"{tensor}_scale"]
        assert (
            quantized.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32 and scale.shape == (2, 3)
        )
        # every (batch, head) uses the whole e4m3 range, and dequantizes to the magnitude of unit normals
        assert torch.equal(quantized.float().abs().amax(dim=(2, 3)), torch.full((2, 3), 448.0))
        real = quantized.float() * scale[:, :, None, None]
        assert 0.9 < real.std().item() < 1.1
        assert 2.5 < real.abs().amax().item() < 6
    other = _inputs(definition, seq_len=64, input_set=1)
    assert not torch.equal(inputs["q"].float(), other["q"].float())  # input sets differ


@pytest.mark.parametrize("name", ["mha_bwd_d64", "mha_bwd_d128_causal"])
def test_backward_inputs_o_and_lse_are_the_forward_of_q_k_v(bundled: TraceSet, name: str) -> None:
    definition = _small(bundled.definition(name))
    inputs = _inputs(definition, seq_len=48)
    forward = _small(bundled.definition(name.replace("mha_bwd", "mha_with_lse")))
    o, lse = load_reference(forward)(inputs["q"], inputs["k"], inputs["v"])
    assert torch.equal(inputs["o"], o) and torch.equal(inputs["lse"], lse)
    assert inputs["do"].dtype == torch.bfloat16 and not torch.equal(inputs["do"], inputs["o"])
    assert bool(torch.isfinite(inputs["lse"]).all())  # Sq == Skv: every query sees at least its own key


def _masked_rows_definition() -> Definition:
    """A causal backward whose queries outnumber its keys (seq_len > kv_len): with bottom-right alignment the
    first seq_len - kv_len queries see no key at all."""
    kv = ["batch_size", "num_heads", "kv_len", "head_dim"]
    return Definition(
        name="mha_bwd_masked_rows_test",
        op_type="mha_bwd",
        axes={
            "batch_size": AxisConst(value=1),
            "num_heads": AxisConst(value=2),
            "seq_len": AxisVar(),
            "kv_len": AxisVar(),
            "head_dim": AxisConst(value=16),
        },
        inputs={
            "q": TensorSpec(shape=QKV, dtype="float32"),
            "k": TensorSpec(shape=kv, dtype="float32"),
            "v": TensorSpec(shape=kv, dtype="float32"),
            "o": TensorSpec(shape=QKV, dtype="float32"),
            "lse": TensorSpec(shape=ROWS, dtype="float32"),
            "do": TensorSpec(shape=QKV, dtype="float32"),
        },
        outputs={n: TensorSpec(shape=s, dtype="float32") for n, s in (("dq", QKV), ("dk", kv), ("dv", kv))},
        reference=BACKWARD_REFERENCE.format(causal=True),
    )


def test_fully_masked_rows_get_minus_inf_lse_zero_output_and_zero_gradients() -> None:
    definition = _masked_rows_definition()
    workload = Workload(
        uuid="masked", axes={"seq_len": 9, "kv_len": 4}, inputs={n: RandomInput() for n in definition.inputs}
    )
    inputs = generate_inputs(definition, workload, 0, secret=b"attention", device="cpu")
    lse, o = inputs["lse"], inputs["o"]
    assert bool(torch.isneginf(lse[..., :5]).all()) and bool(torch.isfinite(lse[..., 5:]).all())
    assert bool((o[..., :5, :] == 0).all()) and not bool(torch.isnan(o).any())
    dq, dk, dv = load_reference(definition)(*inputs.values())
    assert not any(bool(torch.isnan(t).any()) for t in (dq, dk, dv))
    assert bool((dq[..., :5, :] == 0).all())


def test_minus_inf_lse_matches_only_minus_inf() -> None:
    expected = torch.tensor([float("-inf"), float("-inf"), float("-inf"), float("-inf"), 1.5])
    same = compare_tensors(expected.clone(), expected, atol=1e-3, rtol=1e-2)
    assert same.matched == 5
    for wrong in (-1e30, float("-3.4e38"), float("nan"), float("inf"), 0.0):
        candidate = expected.clone()
        candidate[0] = wrong
        result = compare_tensors(candidate, expected, atol=1e308, rtol=1e308)  # no tolerance excuses it
        assert result.matched == 4, wrong


def test_flop_counts_reproduce_the_h100_reference_tflops(bundled: TraceSet) -> None:
    from fibserve.bench.timing.roofline import workload_cost

    rows = list(csv.DictReader((shared("ptxbench-problems") / "h100_reference_latency.csv").open()))
    assert len(rows) == 132
    for row in rows:
        definition = bundled.definition(row["definition_name"])
        axes = definition.axis_values({"seq_len": int(row["seq_len"])})
        inputs = {
            name: torch.empty(definition.resolve_shape(name, axes), dtype=torch.bfloat16, device="meta")
            for name in definition.inputs
        }
        flops, _, _ = workload_cost(definition, axes, inputs, {})
        published = float(row["tflops"]) * 1e12 * float(row["latency_ms"]) * 1e-3
        assert flops == pytest.approx(published, rel=0.04), row
