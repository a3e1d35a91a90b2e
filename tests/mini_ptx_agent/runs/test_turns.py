"""The per-turn table's failure classes: every evaluator status has exactly one, and policy refusals are told
apart from compile errors."""

from __future__ import annotations

import pytest
from fibserve.trace import EvaluationStatus
from mini_ptx_agent.evaluation import NotEvaluated
from mini_ptx_agent.runs.turns import FailureClass, TurnRow, failure_class


@pytest.mark.parametrize("status", [*EvaluationStatus, *NotEvaluated])
def test_every_status_has_a_failure_class(status) -> None:
    assert failure_class(status.value) in FailureClass.__args__


def test_classes_that_reports_count_apart() -> None:
    assert failure_class("PASSED") == "PASSED"
    assert failure_class("INCORRECT_NUMERICAL") == failure_class("INCORRECT_SHAPE") == "incorrect"
    assert failure_class("COMPILE_ERROR") == "compile"
    assert failure_class("COMPILE_ERROR", policy_violations=True) == "policy"
    assert failure_class("SANITIZER_FAILED") == "runtime"
    assert failure_class("INFRASTRUCTURE_ERROR") == "infrastructure"


def test_an_unknown_status_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="PASSED"):
        failure_class("MAYBE")


def test_a_row_refuses_an_unknown_column() -> None:
    row = dict(experiment="e", trajectory="t0", model="m", definition="d", language="triton", arch="sm_90a",
               prompt_tag="p", replica=0, turn=1, failure_class="format", status="FORMAT_ERROR", target_speedup=1.0)  # fmt: skip
    assert TurnRow(**row).min_speedup is None
    with pytest.raises(ValueError):
        TurnRow(**row, speedup=2.0)
