"""Degenerate correctness (issue 20, item 4): outputs an elementwise check cannot judge are found per workload
from the references; near-constant ones are held to a relative-norm check, and a workload of constant outputs
is refused. Unit tests here; the attack on a real CPU evaluation is in test_cpu_evaluation.py."""

from __future__ import annotations

import math

import torch
from fibserve.bench.correctness.compare import compare_outputs
from fibserve.bench.data.degenerate import degeneracy
from fibserve.trace import EvaluationStatus

DTYPES = {"o": torch.float32}


def test_outputs_are_classified_from_every_input_set():
    tiny = [{"o": torch.randn(64) * 1e-4}, {"o": torch.randn(64) * 1e-4}]
    assert degeneracy(tiny, atol=1e-3, rtol=1e-2).kinds == {"o": "near_constant"}
    ones = [{"o": torch.ones(8)}, {"o": torch.ones(8) * 1.001}]
    found = degeneracy(ones, atol=1e-3, rtol=1e-2)
    assert found.kinds == {"o": "constant"} and math.isclose(found.values["o"], 1.0005, rel_tol=1e-6)
    assert "degenerate workload" in found.refusal(["o"], 1e-3, 1e-2)
    varied = [{"o": torch.ones(8)}, {"o": torch.full((8,), 2.0)}]  # constant per set, not across sets
    assert degeneracy(varied, atol=1e-3, rtol=1e-2).kinds == {}
    assert degeneracy([{"o": torch.randn(64)}], atol=1e-3, rtol=1e-2).kinds == {}
    assert degeneracy([{"o": torch.tensor([0.0, math.nan])}], atol=1e-3, rtol=1e-2).kinds == {}
    ints = [{"i": torch.zeros(4, dtype=torch.int32), "o": torch.randn(4)}]
    mixed = degeneracy(ints, atol=1e-3, rtol=1e-2)
    assert mixed.kinds == {"i": "constant"} and mixed.refusal(["i", "o"], 1e-3, 1e-2) is None


def test_zeros_pass_the_elementwise_check_of_a_near_zero_output_and_fail_the_norm_check():
    expected = {"o": torch.randn(256) * 1e-4}
    zeros = {"o": torch.zeros(256)}
    lax = compare_outputs(zeros, expected, DTYPES, atol=1e-3, rtol=1e-2)
    assert lax.status is EvaluationStatus.PASSED  # the hole
    strict = compare_outputs(zeros, expected, DTYPES, atol=1e-3, rtol=1e-2, norm_checked={"o"})
    assert strict.status is EvaluationStatus.INCORRECT_NUMERICAL and "relative L2 error 1" in strict.message
    assert strict.outputs[0].decided_by == "elementwise+relative_norm"
    close = compare_outputs({"o": expected["o"] * 1.001}, expected, DTYPES, atol=1e-3, rtol=1e-2,
                            norm_checked={"o"})  # fmt: skip
    assert close.status is EvaluationStatus.PASSED
    assert math.isclose(close.outputs[0].stats.relative_l2_error, 1e-3, rel_tol=1e-3)
    assert lax.outputs[0].decided_by == "elementwise"
