"""benchmarks/hopper_gemm/fibserve_timing.py without a GPU: its dry run goes through the real Evaluator.

The dry run (``--device cpu``) builds the CUDA reference with the real nvcc (through the build cache, so the
session's one build is shared with test_solutions.py), claims no status for it, reports the Triton Solution's
task error, and keeps going past a Solution that does not compile: that one gets COMPILE_ERROR rows.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "hopper_gemm" / "fibserve_timing.py"
BROKEN_CUDA = """// does not compile: an undeclared function
void run(int A, int B, int C) { definitely_not_declared_anywhere(A, B, C); }
"""


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("fibserve_timing", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tflops_is_2mnk_over_latency(script) -> None:
    # RESULTS.md: M=8192 at 0.8620 ms is 697.6 TFLOP/s.
    assert script.tflops(8192, 7168, 5120, 0.8620) == pytest.approx(697.6, abs=0.1)
    assert script.tflops(70, 7168, 5120, None) is None


def test_refuses_a_cuda_device_that_is_not_there(script, tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert script.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


@pytest.mark.nvcc
@pytest.mark.slow
def test_dry_run_reports_every_row_and_survives_a_build_failure(script, tmp_path: Path, capsys) -> None:
    from fibserve.trace import Solution

    broken = Solution.model_validate(
        {
            "name": "gemm_does_not_compile",
            "definition": "gemm_n7168_k5120",
            "author": "test",
            "spec": {
                "language": "cuda",
                "target_hardware": ["NVIDIA_H200"],
                "entry_point": "kernel.cu::run",
                "binding": "tvm-ffi",
            },
            "sources": [{"path": "kernel.cu", "content": BROKEN_CUDA}],
        }
    )
    extra = tmp_path / "broken.json"
    extra.write_text(broken.model_dump_json())
    out = tmp_path / "out"
    rc = script.main(["--device", "cpu", "--out", str(out), "--solution", str(extra)])
    assert rc == 1  # nothing is PASSED without a GPU

    result = json.loads((out / "fibserve_timing.json").read_text())
    by_solution: dict[str, list[dict]] = {}
    for row in result["rows"]:
        by_solution.setdefault(row["solution"], []).append(row)
    assert sorted(by_solution) == [
        "gemm_does_not_compile",
        "gemm_n7168_k5120_ptxbench_cuda_wgmma_tma",
        "gemm_n7168_k5120_ptxbench_triton_tma",
    ]
    for rows in by_solution.values():
        assert [r["M"] for r in rows] == [70, 232, 972, 2379, 8192]
        assert all("latency_ms" not in r and "speedup" not in r for r in rows)
    assert {r["status"] for r in by_solution["gemm_n7168_k5120_ptxbench_cuda_wgmma_tma"]} == {"NOT_EXECUTED"}
    assert {r["status"] for r in by_solution["gemm_n7168_k5120_ptxbench_triton_tma"]} == {"TASK_ERROR"}
    assert "Triton" in by_solution["gemm_n7168_k5120_ptxbench_triton_tma"][0]["error"]
    broken_rows = by_solution["gemm_does_not_compile"]
    assert {r["status"] for r in broken_rows} == {"COMPILE_ERROR"}
    assert "definitely_not_declared_anywhere" in broken_rows[0]["error"]

    summary = result["solutions"]["gemm_n7168_k5120_ptxbench_cuda_wgmma_tma"]
    assert "build OK" in summary and "HGMMA 0" not in summary and "UTMALDG 0" not in summary
    assert "HGMMA" in summary and "UTMALDG" in summary
    assert set(result["reports"]) == set(by_solution)

    markdown = (out / "fibserve_timing.md").read_text()
    assert "| M | solution | status | latency ms |" in markdown
    assert "`gemm_does_not_compile` COMPILE_ERROR at M = [70, 232, 972, 2379, 8192]" in markdown
    printed = capsys.readouterr().out.splitlines()
    assert printed[-16].split()[:3] == ["M", "solution", "status"]  # the table is printed last
    assert [line.split()[0] for line in printed[-15:]] == [
        m for m in ("70", "232", "972", "2379", "8192") for _ in "abc"
    ]


def test_rows_from_a_passed_gpu_evaluation(script) -> None:
    """The GPU branch of report_rows reads the Performance fields that fibserve.bench.timing.loop.measure writes."""
    from fibserve.bench import EvaluationReport, resolve_config
    from fibserve.bench.report import DeviceInfo
    from fibserve.bench.timing.statistics import summarize
    from fibserve.datasets import default_root
    from fibserve.trace import Correctness, Environment, Evaluation, Performance, Trace
    from fibserve.trace.trace_set import TraceSet

    workloads = sorted(
        TraceSet.load(default_root()).workloads_for("gemm_n7168_k5120"), key=lambda w: w.axes["M"]
    )
    big = workloads[-1]
    performance = Performance(
        latency_ms=0.8620,
        reference_latency_ms=0.8569,
        speedup_factor=0.993,
        extra={
            "measured_on": "gpu",
            "timing_basis": "events",
            "candidate_ms": summarize([0.857, 0.862, 0.953]).model_dump(),
            "reference_ms": summarize([0.8505, 0.8569, 0.949]).model_dump(),
            "speedup_p10": 0.98,
            "speedup_p90": 1.0,
            "pairs": 150,
            "device_start": {"sm_clock_mhz": 1980.0},
            "device_end": {"sm_clock_mhz": 1590.0},
        },
    )
    evaluation = Evaluation(
        status="PASSED",
        environment=Environment(hardware="NVIDIA H200"),
        timestamp="2026-11-30T00:00:00Z",
        correctness=Correctness(max_absolute_error=0.25, max_relative_error=0.004),
        performance=performance,
    )
    report = EvaluationReport(
        definition="gemm_n7168_k5120",
        solution="s",
        config=resolve_config(None),
        device_info=DeviceInfo(device="cuda:0", name="NVIDIA H200"),
        executed=True,
        traces=[Trace(definition="gemm_n7168_k5120", workload=big, solution="s", evaluation=evaluation)],
    )
    rows = script.report_rows(report, [big], 7168, 5120)
    assert rows == [
        {
            "M": 8192,
            "solution": "s",
            "workload": big.uuid,
            "status": "PASSED",
            "max_abs_error": 0.25,
            "max_rel_error": 0.004,
            "latency_ms": 0.8620,
            "latency_p10_ms": pytest.approx(0.858),
            "latency_p90_ms": pytest.approx(0.9348),
            "tflops": pytest.approx(697.6, abs=0.1),
            "reference_ms": 0.8569,
            "reference_tflops": pytest.approx(701.7, abs=0.1),
            "speedup": 0.993,
            "speedup_p10": 0.98,
            "speedup_p90": 1.0,
            "pairs": 150,
            "timing_basis": "events",
            "sm_clock_mhz_start": 1980.0,
            "sm_clock_mhz_end": 1590.0,
        }
    ]
    header, line = script.table_lines(rows)
    assert header.split()[-1] == "speedup" and line.split()[:3] == ["8192", "s", "PASSED"]
    assert line.split()[-1] == "0.993x" and "697.6" in line.split()
