"""The bundled default trace set: loads cleanly, keeps the public facts, and its references compute right."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
import torch
from fibserve.datasets import default_root
from fibserve.trace import AxisVar, Definition
from fibserve.trace.trace_set import TraceSet
from trace_helpers import shared


@pytest.fixture(scope="module")
def bundled() -> TraceSet:
    return TraceSet.load(default_root())


def _run(definition: Definition, *args):
    namespace: dict = {}
    exec(compile(definition.reference, definition.name, "exec"), namespace)
    return namespace["run"](*args)


def test_bundled_set_loads_without_problems(bundled: TraceSet) -> None:
    assert bundled.counts() == {
        "definitions": 86,
        "solutions": 88,
        "workloads": 309,
        "traces": 0,
        "errors": 0,
        "warnings": 0,
    }
    for definition in bundled.definitions.values():
        assert definition.description and ("PTXBench" in definition.description)
        assert bundled.workloads_for(definition.name), definition.name


def test_files_are_what_the_generator_writes(tmp_path) -> None:
    from fibserve.datasets.generate_default import write_default

    problems = shared("ptxbench-problems")
    write_default(problems, tmp_path)
    for path in sorted(tmp_path.rglob("*.json*")):
        committed = default_root() / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), f"{committed} is stale: rerun generate_default"


def test_gemm_workloads_match_the_ptxbench_problem_list(bundled: TraceSet) -> None:
    rows = list(csv.DictReader((shared("ptxbench-problems") / "gemm_problems.csv").open()))
    assert len(rows) == 82
    for row in rows:
        trace = bundled.workload_trace(row["workload_uuid"])
        assert trace.definition == row["definition_name"]
        assert trace.workload.axes == {"M": int(row["M"])}
        n, k = map(int, re.fullmatch(r"gemm_n(\d+)_k(\d+)", row["definition_name"]).groups())
        assert bundled.definition(row["definition_name"]).const_axes == {"N": n, "K": k}
    quickstart = bundled.workload("94920358-01a8-4c5b-9209-3103fd490e94")
    assert quickstart.axes == {"M": 8192}
    assert bundled.workload_trace(quickstart.uuid).definition == "gemm_n7168_k5120"


def test_gemm_n7168_k5120_matches_the_public_definition(bundled: TraceSet) -> None:
    public_raw = json.loads((shared("ptxbench-problems") / "gemm_n7168_k5120.definition.json").read_text())
    public = Definition.model_validate(public_raw)
    ours = bundled.definition("gemm_n7168_k5120")
    assert ours.op_type == public.op_type
    assert {n: (type(a), getattr(a, "value", None)) for n, a in ours.axes.items()} == {
        n: (type(a), getattr(a, "value", None)) for n, a in public.axes.items()
    }
    assert [(n, s.shape, s.dtype) for n, s in ours.inputs.items()] == [
        (n, s.shape, s.dtype) for n, s in public.inputs.items()
    ]
    assert [(n, s.shape, s.dtype) for n, s in ours.outputs.items()] == [
        (n, s.shape, s.dtype) for n, s in public.outputs.items()
    ]
    generator = torch.Generator().manual_seed(0)
    for m in (1, 7, 33):
        # Small K and N stand in for 5120 and 7168: the reference semantics do not depend on them.
        a = torch.randn(m, 64, generator=generator).to(torch.bfloat16)
        b = torch.randn(48, 64, generator=generator).to(torch.bfloat16)
        expected = _run(public, a, b)
        got = _run(ours, a, b)
        assert got.dtype == expected.dtype == torch.bfloat16 and got.shape == (m, 48)
        assert torch.equal(got, expected)
    a = torch.randn(2, 5120).to(torch.bfloat16)
    b = torch.randn(7168, 5120).to(torch.bfloat16)
    assert torch.equal(_run(ours, a, b), _run(public, a, b))


def test_public_flashinfer_gemm_names_keep_float16(bundled: TraceSet) -> None:
    example = Definition.model_validate_json(
        (shared("flashinfer-bench-example") / "definitions" / "gemm_n4096_k4096.json").read_text()
    )
    ours = bundled.definition("gemm_n4096_k4096")
    assert [(s.shape, s.dtype) for s in ours.inputs.values()] == [
        (s.shape, s.dtype) for s in example.inputs.values()
    ]
    assert ours.outputs["C"].dtype == example.outputs["C"].dtype
    assert bundled.definition("gemm_n5120_k5120").inputs["A"].dtype.value == "bfloat16"


@pytest.mark.parametrize("causal", [False, True])
def test_mha_with_lse_reference_matches_sdpa_and_logsumexp(bundled: TraceSet, causal: bool) -> None:
    name = "mha_with_lse_d128_causal" if causal else "mha_with_lse_d128"
    definition = bundled.definition(name)
    assert definition.const_axes == {"batch_size": 4, "num_heads": 48, "head_dim": 128}
    assert definition.var_axes == ["seq_len"]
    assert definition.resolve_shape("q", {"seq_len": 512}) == (4, 48, 512, 128)
    assert definition.resolve_shape("lse", {"seq_len": 512}) == (4, 48, 512)
    assert [s.dtype.value for s in definition.outputs.values()] == ["bfloat16", "float32"]
    seq_lens = sorted(w.axes["seq_len"] for w in bundled.workloads_for(name))
    assert seq_lens == [512, 1024, 2048, 4096, 8192, 16384]
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 37, 128, generator=generator).to(torch.bfloat16) for _ in range(3))
    o, lse = _run(definition, q, k, v)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(128)
    if causal:
        scores = scores.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), rtol=1e-5, atol=1e-5)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal
    )
    torch.testing.assert_close(o.float(), expected, rtol=2e-2, atol=2e-2)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    if causal:
        torch.testing.assert_close(lse[..., 0], scores[..., 0, 0])  # row 0 sees only key 0


def test_mha_uuids_come_from_the_ptxbench_lists(bundled: TraceSet) -> None:
    problems = shared("ptxbench-problems")
    rows = [
        r
        for r in csv.DictReader((problems / "h100_reference_latency.csv").open())
        if r["definition_name"] in ("mha_with_lse_d128", "mha_with_lse_d128_causal")
    ]
    rows += [
        r
        for r in csv.DictReader((problems / "mha_problems.csv").open())
        if r["definition_name"] in ("mha_with_lse_d128", "mha_with_lse_d128_causal")
    ]
    for row in rows:
        trace = bundled.workload_trace(row["workload_uuid"])
        assert trace.definition == row["definition_name"]
        assert trace.workload.axes == {"seq_len": int(row["seq_len"])}


def test_small_float32_definitions_for_the_triton_interpreter(bundled: TraceSet) -> None:
    small = [d for d in bundled.definitions.values() if "suite:ptxbench-ci" in d.tags]
    assert {d.name for d in small} >= {"vector_add_f32", "softmax_rows_f32", "rmsnorm_f32"}
    for definition in small:
        assert all(
            s.dtype.value == "float32" for s in [*definition.inputs.values(), *definition.outputs.values()]
        )
        assert any(isinstance(a, AxisVar) for a in definition.axes.values())
        workloads = bundled.workloads_for(definition.name)
        assert 2 <= len(workloads) <= 3
        for workload in workloads:
            args = []
            for name in definition.inputs:
                shape = definition.resolve_shape(name, workload.axes)
                args.append(workload.inputs[name].value if shape is None else torch.randn(shape))
                if shape is not None:
                    assert math.prod(shape) <= 1 << 20  # small enough for CPU interpretation
            out = _run(definition, *args)
            assert out.shape == definition.resolve_shape(definition.output_names[0], workload.axes)
    x = torch.randn(5, 1024)
    torch.testing.assert_close(_run(bundled.definition("softmax_rows_f32"), x).sum(-1), torch.ones(5))
    x, w = torch.randn(3, 512), torch.randn(512)
    expected = torch.nn.functional.rms_norm(x, (512,), w, eps=1e-6)
    torch.testing.assert_close(_run(bundled.definition("rmsnorm_f32"), x, w, 1e-6), expected)
