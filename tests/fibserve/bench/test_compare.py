"""Correctness comparison: the edge cases a kernel could exploit or a careless harness could get wrong."""

import math

import pytest
import torch
from fibserve.bench.correctness.compare import compare_outputs, compare_tensors
from fibserve.trace import EvaluationStatus


def _judge(actual, expected, dtype=torch.float32, **kw):
    kw.setdefault("atol", 1e-3)
    kw.setdefault("rtol", 1e-3)
    return compare_outputs({"out": actual}, {"out": expected}, {"out": dtype}, **kw)


def test_equal_tensors_pass_with_zero_error():
    x = torch.randn(100)
    result = _judge(x.clone(), x)
    assert result.status is EvaluationStatus.PASSED
    assert result.max_errors() == (0.0, 0.0)
    assert result.min_matched_ratio() == 1.0


def test_nan_never_matches_even_nan_against_nan():
    y = torch.tensor([1.0, float("nan"), 3.0])
    x = torch.tensor([1.0, float("nan"), 3.0])
    result = _judge(x, y)
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL
    stats = result.outputs[0].stats
    assert stats.nan_count == 1 and stats.matched == 2
    assert math.isnan(result.max_errors()[0])


def test_all_nan_output_is_numerical_failure():
    result = _judge(torch.full((8,), float("nan")), torch.zeros(8))
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert result.min_matched_ratio() == 0.0


def test_inf_matches_only_the_same_inf():
    y = torch.tensor([float("inf"), float("-inf"), float("inf"), 1.0])
    same = torch.tensor([float("inf"), float("-inf"), float("inf"), 1.0])
    assert _judge(same, y).status is EvaluationStatus.PASSED
    flipped = torch.tensor([float("-inf"), float("-inf"), float("inf"), 1.0])
    result = _judge(flipped, y)
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert result.outputs[0].stats.matched == 3
    finite_for_inf = torch.tensor([1e30, float("-inf"), float("inf"), 1.0])
    assert _judge(finite_for_inf, y).status is EvaluationStatus.INCORRECT_NUMERICAL


def test_tolerance_boundary_uses_atol_plus_rtol_times_reference():
    y = torch.tensor([100.0])
    # atol + rtol*|y| = 0.01 + 0.01*100 = 1.01
    assert _judge(torch.tensor([101.0]), y, atol=0.01, rtol=0.01).status is EvaluationStatus.PASSED
    assert (
        _judge(torch.tensor([101.1]), y, atol=0.01, rtol=0.01).status is EvaluationStatus.INCORRECT_NUMERICAL
    )


def test_shape_is_checked_before_values():
    result = _judge(torch.zeros(4, 2), torch.zeros(8))
    assert result.status is EvaluationStatus.INCORRECT_SHAPE
    assert "(4, 2)" in result.message


def test_dtype_is_checked_against_the_definition():
    result = _judge(torch.zeros(8, dtype=torch.float16), torch.zeros(8), dtype=torch.float32)
    assert result.status is EvaluationStatus.INCORRECT_DTYPE


def test_missing_output_is_reported():
    result = compare_outputs({}, {"out": torch.zeros(2)}, {"out": torch.float32}, atol=0, rtol=0)
    assert result.status is EvaluationStatus.INCORRECT_SHAPE


def test_matched_ratio_threshold():
    y = torch.zeros(100)
    x = y.clone()
    x[:3] = 1.0
    assert _judge(x, y, required_matched_ratio=0.97).status is EvaluationStatus.PASSED
    assert _judge(x, y, required_matched_ratio=0.98).status is EvaluationStatus.INCORRECT_NUMERICAL
    assert _judge(x, y).outputs[0].stats.matched_ratio == pytest.approx(0.97)


def test_chunking_gives_the_same_answer_as_one_pass():
    torch.manual_seed(0)
    y = torch.randn(10_000)
    x = y + torch.randn(10_000) * 1e-3
    x[7777] = float("nan")
    x[1234] = 5.0
    one = compare_tensors(x, y, atol=1e-3, rtol=1e-3, chunk=1 << 24)
    many = compare_tensors(x, y, atol=1e-3, rtol=1e-3, chunk=1000)
    assert one.matched == many.matched and one.nan_count == many.nan_count == 1
    finite = compare_tensors(torch.where(torch.isnan(x), y, x), y, atol=1e-3, rtol=1e-3, chunk=999)
    assert finite.max_absolute_error == pytest.approx(float((5.0 - y[1234]).abs()))


def test_bfloat16_output_is_compared_in_fp32():
    y = torch.tensor([1.0, 2.0, 3.0])
    x = y.to(torch.bfloat16)
    result = compare_outputs({"o": x}, {"o": y}, {"o": torch.bfloat16}, atol=0, rtol=0)
    assert result.status is EvaluationStatus.PASSED


def test_integer_outputs_must_be_exact():
    y = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert _judge(y.clone(), y, dtype=torch.int32).status is EvaluationStatus.PASSED
    off = torch.tensor([1, 2, 4], dtype=torch.int32)
    result = _judge(off, y, dtype=torch.int32, atol=10, rtol=10)
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL


def test_second_output_failure_is_reported():
    expected = {"a": torch.zeros(2), "b": torch.ones(2)}
    actual = {"a": torch.zeros(2), "b": torch.zeros(2)}
    result = compare_outputs(actual, expected, {"a": torch.float32, "b": torch.float32}, atol=0, rtol=0)
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert [o.status for o in result.outputs] == [
        EvaluationStatus.PASSED,
        EvaluationStatus.INCORRECT_NUMERICAL,
    ]
    assert "'b'" in result.message
