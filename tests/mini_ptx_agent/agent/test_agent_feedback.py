"""Feedback text is deterministic and its verdict line follows the structured result."""

from eval_reports import report
from mini_ptx_agent.environment.report import StaticAnalysis
from mini_ptx_agent.feedback import format_feedback, trim, verdict_line


def test_same_report_same_text() -> None:
    a = report(["PASSED", "INCORRECT_NUMERICAL"], speedups=[1.3, 1.0])
    b = report(["PASSED", "INCORRECT_NUMERICAL"], speedups=[1.3, 1.0])
    assert format_feedback(a, turn=2) == format_feedback(b, turn=2)


def test_failing_feedback_lists_each_workload_and_the_error_log() -> None:
    text = format_feedback(report(["PASSED", "INCORRECT_NUMERICAL"], speedups=[1.3, 1.0]), turn=2)
    lines = text.splitlines()
    assert lines[0].endswith("turn 2: INCORRECT_NUMERICAL")
    assert any(
        "w0" in line
        and "PASSED" in line
        and "speedup 1.300x" in line
        and "kernel 0.7692 ms" in line
        and "reference 1.0000 ms" in line
        for line in lines
    )
    assert any(
        "w1" in line and "INCORRECT_NUMERICAL" in line and "max abs error 0.5" in line for line in lines
    )
    assert "boom" in text
    assert lines[-1].startswith("VERDICT: INCORRECT: 1 of 2 workloads failed")


def test_verdicts() -> None:
    assert verdict_line(report(["PASSED"], speedups=[1.5])).startswith("VERDICT: TARGET MET")
    assert verdict_line(report(["PASSED"], speedups=[0.5])).startswith("VERDICT: CORRECT BUT TOO SLOW")
    cpu = report(["PASSED"], speedups=[9.0], hardware="cpu")
    assert verdict_line(cpu).startswith("VERDICT: CORRECT (not timed on a GPU)")
    assert "not a GPU timing" in format_feedback(cpu)


def test_analysis_families_resources_and_compile_log() -> None:
    ok = report(["PASSED"], speedups=[1.5])
    ok.static_analysis = StaticAnalysis(
        compiled=True,
        ptx_families=["wgmma"],
        sass_families=["HGMMA"],
        registers=168,
        shared_memory_bytes=2048,
        spill_bytes=0,
    )
    text = format_feedback(ok)
    assert "Architecture instructions: PTX: wgmma. SASS: HGMMA." in text
    assert "Resources: registers 168, static shared memory 2048 bytes, spills 0 bytes." in text
    bad = report(["COMPILE_ERROR"])
    bad.static_analysis = StaticAnalysis(compiled=False, compile_log="kernel.cu(3): error: identifier x")
    text = format_feedback(bad)
    assert "Compile log:" in text and "identifier x" in text


def test_trim_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    out = trim(text, 300)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "omitted" in out and len(out) < 400


def test_compile_error_log_is_quoted_once() -> None:
    bad = report(["COMPILE_ERROR"])
    bad.workloads[0].log = 'kernel.cu(7): error: identifier "w" is undefined'
    bad.static_analysis = StaticAnalysis(
        compiled=False, compile_log='kernel.cu(7): error: identifier "w" is undefined\n'
    )
    assert format_feedback(bad).count("identifier") == 1


def test_speedups_are_labelled_with_the_baseline_the_reference_and_the_roofline() -> None:
    from eval_reports import trace
    from fibserve.trace import Performance
    from mini_ptx_agent.environment.verdict import build_report
    from mini_ptx_agent.task import TaskConfig

    timed = trace("w0", "PASSED", speedup=0.9)
    timed.evaluation.performance = Performance(
        latency_ms=3.0,
        reference_latency_ms=2.7,
        speedup_factor=0.9,
        extra={
            "measured_on": "gpu",
            "speedup_basis": "baseline",
            "baseline": {"solution": "fp8_baseline", "description": "Not an FP8 kernel: bf16 speed."},
            "vs_reference": {"timed": True, "speedup": 31.5},
            "roofline": {"device_model": "H200", "fraction": 0.27, "floor_ms": 0.8, "flops": 1.0, "bytes": 1.0,
                         "achieved_tflops": 270.0, "bound": "compute", "peak_tflops": 1979.0, "peak_tb_s": 4.8},
        },
    )  # fmt: skip
    task = TaskConfig(definition="fp8_mha_with_lse_d128", language="cuda", target_speedup=1.0)
    result = build_report(task, solution_name="s", traces=[timed])
    assert (
        result.workloads[0].speedup_basis == "baseline" and result.workloads[0].speedup_vs_reference == 31.5
    )
    text = format_feedback(result)
    line = next(line for line in text.splitlines() if "w0" in line)
    assert "speedup 0.900x vs baseline fp8_baseline" in line and "baseline 2.7000 ms" in line
    assert "31.5x vs the reference" in line and "27% of the H200 roofline" in line
    assert "Speedups are against the baseline fp8_baseline (Not an FP8 kernel: bf16 speed.)" in text
    assert text.splitlines()[-1].startswith("VERDICT: CORRECT BUT TOO SLOW")  # judged on the baseline speedup
