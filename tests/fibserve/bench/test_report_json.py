"""The EvaluationReport as JSON (what `fibserve evaluate --json` prints and the server stores)."""

from __future__ import annotations

import json
import math

import pytest
from fibserve.bench.config import EvalConfig
from fibserve.bench.report import DeviceInfo, EvaluationReport
from fibserve.trace import Trace


def _trace(evaluation: dict) -> Trace:
    return Trace.model_validate(
        {
            "definition": "vector_add_f32",
            "workload": {"uuid": "w", "axes": {"N": 4}, "inputs": {}},
            "solution": "s",
            "evaluation": {"environment": {"hardware": "cpu"}, "timestamp": "2026-01-01T00:00:00Z"}
            | evaluation,
        }
    )


def _report(*traces: Trace) -> EvaluationReport:
    return EvaluationReport(
        definition="vector_add_f32",
        solution="s",
        traces=list(traces),
        config=EvalConfig(),
        device_info=DeviceInfo(device="cpu", name="cpu"),
        executed=True,
    )


def _strict(text: str) -> dict:
    return json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token} in the JSON"))


def test_nan_errors_are_printed_as_nan_strings_and_read_back() -> None:
    nan = {"max_relative_error": math.nan, "max_absolute_error": math.nan}
    report = _report(_trace({"status": "INCORRECT_NUMERICAL", "correctness": nan}))
    text = report.model_dump_json()
    assert _strict(text)["traces"][0]["evaluation"]["correctness"]["max_absolute_error"] == "NaN"
    again = EvaluationReport.model_validate_json(text)
    assert math.isnan(again.traces[0].evaluation.correctness.max_absolute_error)


def test_untimed_performance_is_null_and_public_timings_still_load() -> None:
    from fibserve.bench.timing.loop import untimed_performance

    untimed = untimed_performance("CPU mode: nothing is timed without a GPU").model_dump(mode="json")
    assert (untimed["latency_ms"], untimed["reference_latency_ms"], untimed["speedup_factor"]) == (None,) * 3
    assert untimed["extra"]["timed"] is False
    public = {"latency_ms": 0.5, "reference_latency_ms": 1.0, "speedup_factor": 2.0}  # FlashInfer Trace form
    trace = _trace({"status": "PASSED", "correctness": {}, "performance": public})
    assert trace.evaluation.performance.model_dump(exclude={"extra"}) == public
