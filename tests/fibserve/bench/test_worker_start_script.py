"""benchmarks/worker_start.py's evaluations on CPU: what each evaluation waited for its workers."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def script(load_benchmark):
    return load_benchmark("worker_start.py")


@pytest.mark.slow
def test_evaluations_report_the_waits_for_the_candidates_worker_and_the_twin(script) -> None:
    result = script.evaluations("cpu", 2)
    assert result["device"] == "cpu" and result["statuses"] == {"PASSED": 2}
    assert result["per_minute"] > 0
    assert result["worker_start_phase_ms_p50"] >= 0.0
    assert result["reference_worker_phase_ms_p50"] == 0.0  # on CPU nothing is timed: no twin starts
    phases = result["phase_ms_p50"]  # where an evaluation's time goes, every phase of the report's timings_s
    assert {"load", "correctness", "total"} <= set(phases) and "timing" not in phases
    assert 0.0 < phases["correctness"] < phases["total"]
