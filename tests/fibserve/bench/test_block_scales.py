"""FP8 inputs with block scales (fibserve.bench.data.derived): the 1x128 activation and 128x128 weight scales
of the FP8 GEMMs are positive, use the whole e4m3 range per block, and dequantize to the bf16 values."""

from __future__ import annotations

import math

import pytest
import torch
from fibserve.bench.config import resolve_config
from fibserve.bench.correctness.compare import compare_outputs
from fibserve.bench.data.derived import DerivedInputError, quantize_fp8
from fibserve.bench.data.inputs import generate_inputs
from fibserve.datasets.fp8_gemm import fp8_gemm_definition, fp8_gemm_definitions
from fibserve.trace import RandomInput, Workload


def _expand(scale: torch.Tensor, rows: int, block_rows: int, cols: int) -> torch.Tensor:
    return scale.repeat_interleave(block_rows, 0)[:rows].repeat_interleave(128, 1)[:, :cols]


def test_fp8_gemm_inputs_have_positive_block_scales_that_fill_each_block() -> None:
    definition = fp8_gemm_definition(2112, 640)  # N not a multiple of 128: a short last weight block
    workload = Workload(uuid="fp8", axes={"M": 70}, inputs={n: RandomInput() for n in definition.inputs})
    inputs = generate_inputs(definition, workload, 0, secret=b"fp8", device="cpu")
    a, a_scale, b, b_scale = (inputs[n] for n in ("A", "A_scale", "B", "B_scale"))
    assert a.dtype == b.dtype == torch.float8_e4m3fn and a_scale.dtype == b_scale.dtype == torch.float32
    assert a_scale.shape == (70, 5) and b_scale.shape == (17, 5)
    assert bool((a_scale > 0).all()) and bool((b_scale > 0).all())
    # every 1x128 block of A and every 128x128 block of B reaches e4m3's largest value, 448
    blocks_a = a.float().abs().reshape(70, 5, 128).amax(dim=2)
    assert torch.equal(blocks_a, torch.full((70, 5), 448.0))
    padded_b = torch.nn.functional.pad(b.float().abs(), (0, 0, 0, 17 * 128 - 2112))
    assert torch.equal(padded_b.reshape(17, 128, 5, 128).amax(dim=(1, 3)), torch.full((17, 5), 448.0))
    real_a = a.float() * _expand(a_scale, 70, 1, 640)
    real_b = b.float() * _expand(b_scale, 2112, 128, 640)
    assert 0.9 < real_a.std() < 1.1 and 0.9 < real_b.std() < 1.1  # bf16 standard normals, dequantized


def test_block_quantization_is_within_e4m3_rounding_of_the_values() -> None:
    values = torch.randn(300, 384, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    quantized, scale = quantize_fp8(values, torch.float8_e4m3fn, (3, 3))
    real = quantized.float() * _expand(scale, 300, 128, 384)
    error = (real - values.float()).abs()
    # e4m3 keeps 3 mantissa bits: rounding is within 1/16 of the value, and within half a subnormal step
    # (2^-10 times the scale) below 2^-6
    bound = values.float().abs() / 16 + _expand(scale, 300, 128, 384) * 2**-10
    assert bool((error <= bound).all())


def test_a_scale_that_is_no_block_grid_is_refused() -> None:
    with pytest.raises(DerivedInputError, match="ceil"):
        quantize_fp8(torch.randn(300, 384), torch.float8_e4m3fn, (3, 4))


@pytest.mark.parametrize("definition", [d for d, _ in fp8_gemm_definitions()], ids=lambda d: d.name)
def test_each_fp8_gemm_bound_passes_the_vendor_error_and_refuses_a_dropped_k_block(definition) -> None:
    """The per-definition atol is 5% of C's std (sqrt(K) for unit-normal operands): above the error of
    torch._scaled_mm's blockwise kernel measured on the H200 (3.1% of C's std at most), below what a kernel
    that drops one 128-wide K block gets wrong (a K block's sum has std sqrt(128) = 11.3)."""
    k = int(definition.name.rsplit("_k", 1)[1])
    config = resolve_config(definition)
    assert config.rtol == 0.01 and math.isclose(config.atol, math.ceil(0.5 * math.sqrt(k)) / 10)
    g = torch.Generator().manual_seed(k)
    a, b = torch.randn(64, k, generator=g), torch.randn(256, k, generator=g)
    exact = a @ b.t()
    tolerances = {
        "atol": config.atol,
        "rtol": config.rtol,
        "required_matched_ratio": config.required_matched_ratio,
    }
    vendor = exact + 0.031 * math.sqrt(k) * torch.sign(torch.randn(exact.shape, generator=g))
    assert compare_outputs({"C": vendor}, {"C": exact}, {"C": torch.float32}, **tolerances).status == "PASSED"
    dropped = exact - a[:, :128] @ b[:, :128].t()
    assert (
        compare_outputs({"C": dropped}, {"C": exact}, {"C": torch.float32}, **tolerances).status != "PASSED"
    )
