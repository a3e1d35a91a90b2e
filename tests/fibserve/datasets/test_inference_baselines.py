"""The baselines of the inference suite (fibserve.datasets.inference_baselines) without a GPU: each falls back
to the definition's reference and says so; the pieces its fast paths feed the kernels are checked against the
reference's own reading of the inputs (pages gathered token by token, LSE layouts, FP8 dequantization)."""

from __future__ import annotations

import math

import pytest
import torch
from fibserve.bench.config import resolve_config
from fibserve.bench.correctness.compare import compare_tensors
from fibserve.bench.data.inputs import generate_inputs
from fibserve.bench.data.reference import load_reference, reference_namespace
from fibserve.datasets import default_root, gqa
from fibserve.datasets.fp8_gemm import fp8_gemm_definition
from fibserve.datasets.inference_baselines import VARLEN, inference_baseline
from fibserve.trace import RandomInput, ScalarInput, Workload
from fibserve.trace.trace_set import TraceSet


def _module(solution) -> dict:
    namespace: dict = {"__name__": f"baseline_{solution.name}"}
    exec(compile(solution.sources[0].content, solution.name, "exec"), namespace)
    return namespace


def _inputs(definition, axes: dict) -> dict:
    inputs = {n: ScalarInput(value=0.09) if n == "sm_scale" else RandomInput() for n in definition.inputs}
    workload = Workload(uuid=f"b-{definition.name}", axes=axes, inputs=inputs)
    return generate_inputs(definition, workload, 0, secret=b"baselines", device="cpu")


CASES = [
    (
        gqa.paged_decode((8, 2, 64), 16),
        {"batch_size": 4, "len_indptr": 5, "num_kv_indices": 11, "num_pages": 16},
    ),
    (
        gqa.paged_prefill((8, 2, 64), 1),
        {"len_indptr": 3, "total_q": 20, "num_kv_indices": 50, "num_pages": 60},
    ),
    (gqa.ragged_prefill((8, 2, 64)), {"len_indptr": 3, "total_q": 20, "total_kv": 45}),
    (fp8_gemm_definition(256, 384), {"M": 24}),
]


@pytest.mark.parametrize(("definition", "axes"), CASES, ids=[c[0].name for c in CASES])
def test_without_a_gpu_the_baseline_falls_back_and_names_its_path(definition, axes) -> None:
    baseline = inference_baseline(definition)
    module = _module(baseline)
    inputs = _inputs(definition, axes)
    got = module["run"](*inputs.values())
    expected = load_reference(definition)(*inputs.values())
    chosen = module["_CHOSEN"][0].__name__
    if definition.op_type == "fp8_gemm":  # PyTorch's CPU _scaled_mm takes one scale per tensor only
        assert chosen == "per_k_block"
        config = resolve_config(definition)
        assert compare_tensors(got, expected, atol=config.atol, rtol=config.rtol).matched == got.numel()
    else:
        assert chosen == "reference"
        for a, b in zip(got, expected, strict=True):
            assert torch.equal(a, b)


def test_every_bundled_inference_definition_has_its_baseline() -> None:
    bundled = TraceSet.load(default_root())
    kinds = {}
    for definition in bundled.definitions.values():
        solution = inference_baseline(definition)
        if solution is not None:
            assert bundled.baseline_for(definition.name) == solution, definition.name
            kinds[definition.op_type] = solution.name.rsplit("_baseline_", 1)[1]
    assert kinds == {
        "gqa_paged": "flash_varlen",
        "gqa_ragged": "flash_varlen",
        "mla_ragged": "flash_varlen",
        "mla_paged": "efficient_varlen",
        "gdn": "reference",
        "fp8_gemm": "scaled_mm",
    }


def test_gathered_pages_are_the_tokens_the_reference_reads() -> None:
    definition = gqa.paged_prefill((8, 2, 64), 16)
    inputs = _inputs(
        definition, {"batch_size": 3, "len_indptr": 4, "total_q": 30, "num_kv_indices": 9, "num_pages": 12}
    )
    helpers: dict = {}
    exec(VARLEN, helpers)
    lengths = helpers["lengths_of"](inputs["kv_indptr"], inputs["kv_last_page_len"], 16)
    tokens = helpers["gather"](inputs["k_cache"], inputs["kv_indptr"], inputs["kv_indices"], lengths, 16)
    offsets = helpers["offsets"](lengths)
    fetch_of = reference_namespace(definition)["paged_fetch"]
    for b in range(3):
        pages = inputs["kv_indices"][int(inputs["kv_indptr"][b]) : int(inputs["kv_indptr"][b + 1])].long()
        fetch = fetch_of((inputs["k_cache"], inputs["k_cache"]), lambda kv: (kv[0], kv[1]), pages, 16)
        assert torch.equal(tokens[int(offsets[b]) : int(offsets[b + 1])], fetch(0, int(lengths[b]))[0])


def test_both_lse_layouts_become_base_2_rows() -> None:
    helpers: dict = {}
    exec(VARLEN, helpers)
    cu = torch.tensor([0, 3, 5, 9], dtype=torch.int32)
    packed = torch.randn(4, 9)  # [heads, rows], natural log
    padded = torch.full((3, 4, 32), float("nan"))  # [sequences, heads, max_q rounded up]
    for s in range(3):
        for p in range(int(cu[s + 1] - cu[s])):
            padded[s, :, p] = packed[:, int(cu[s]) + p]
    expected = packed.t() / math.log(2.0)
    assert torch.equal(helpers["base2_rows"](packed, cu, 9), expected)
    assert torch.equal(helpers["base2_rows"](padded, cu, 9), expected)
