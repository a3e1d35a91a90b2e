"""`fibserve evaluate`'s table labels every speed number with what it is against."""

from __future__ import annotations

import io

from fibserve.bench import EvaluationReport, resolve_config
from fibserve.bench.report import DeviceInfo
from fibserve.cli.tables import print_report
from fibserve.trace import Comparisons, Correctness, Environment, Evaluation, Performance, Trace, Workload
from rich.console import Console

BASELINE = {
    "solution": "mha_with_lse_d128_baseline_cudnn_sdpa",
    "description": "PyTorch cuDNN SDPA with LSE.",
}
ROOFLINE = {
    "device_model": "H200",
    "fraction": 0.55,
    "floor_ms": 1.5,
    "flops": 1.6e12,
    "bytes": 4e8,
    "achieved_tflops": 540.0,
    "bound": "compute",
    "peak_tflops": 989.0,
    "peak_tb_s": 4.8,
    "peak_source": "NVIDIA H200 Tensor Core GPU datasheet",
}


def _report(extra: dict) -> EvaluationReport:
    performance = Performance(latency_ms=2.5, reference_latency_ms=2.7, speedup_factor=1.08, extra=extra)
    evaluation = Evaluation(
        status="PASSED",
        environment=Environment(hardware="NVIDIA H200"),
        timestamp="2026-12-01T00:00:00Z",
        correctness=Correctness(
            max_absolute_error=1e-4, max_relative_error=1e-3, extra={"matched_ratio": 1.0}
        ),
        performance=performance,
    )
    workload = Workload(uuid="bc38b351-d595-451b-9153-8e225702e53b", axes={"seq_len": 4096}, inputs={})
    return EvaluationReport(
        definition="mha_with_lse_d128",
        solution="mine",
        config=resolve_config(None),
        device_info=DeviceInfo(device="cuda:0", name="NVIDIA H200"),
        executed=True,
        traces=[
            Trace(definition="mha_with_lse_d128", workload=workload, solution="mine", evaluation=evaluation)
        ],
    )


def _printed(report: EvaluationReport) -> str:
    out = io.StringIO()
    print_report(report, Console(file=out, width=200))
    return out.getvalue()


def test_a_baseline_speedup_names_the_baseline_the_reference_speedup_and_the_roofline() -> None:
    extra = {
        "speedup_basis": "baseline",
        "baseline": {**BASELINE, "latency_ms": 2.7, "speedup": 1.08, "pairs": 150},
        "vs_reference": {"timed": True, "latency_ms": 95.0, "speedup": 38.0, "pairs": 30, "every": 5,
                         "reason": "sampled: timed next to every 5th candidate call"},
        "roofline": ROOFLINE,
    }  # fmt: skip
    report = _report(extra)
    seen = Comparisons.of(report.traces[0].evaluation.performance)
    assert seen.vs_reference.every == 5 and seen.roofline.bound == "compute"
    text = _printed(report)
    assert "base ms" in text and "vs ref" in text and "roofline" in text
    row = next(line for line in text.splitlines() if "PASSED" in line)
    assert "1.080x" in row and "38x" in row and "55%" in row
    assert "speedup: against the baseline mha_with_lse_d128_baseline_cudnn_sdpa: PyTorch cuDNN SDPA" in text
    assert "vs ref: sampled: timed next to every 5th candidate call" in text
    assert "roofline: floor_ms / ms on the H200 (989 TFLOP/s, 4.8 TB/s: NVIDIA H200" in text


def test_without_a_baseline_the_table_says_the_speedup_is_against_the_reference() -> None:
    extra = {
        "speedup_basis": "reference",
        "no_baseline": "'x' names no baseline Solution",
        "vs_reference": {"timed": True, "latency_ms": 2.7, "speedup": 1.08, "pairs": 150, "every": 1},
    }
    assert "speedup: against the reference ('x' names no baseline Solution)" in _printed(_report(extra))
