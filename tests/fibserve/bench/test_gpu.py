"""GPU-only checks of the harness pieces (run by scripts/gpu_suite.py on the H200; skipped elsewhere)."""

from __future__ import annotations

import pytest
import torch
from fibserve.trace import EvaluationStatus

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@gpu
@needs_gpu
def test_cold_l2_buffer_is_at_least_twice_l2_and_timing_is_bounded():
    from fibserve.bench.worker.clock import ColdL2, time_call

    device = torch.device("cuda:0")
    flush = ColdL2(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    assert flush.buffer.numel() * 4 >= 2 * l2
    a = torch.randn(2048, 2048, device=device)
    timed = time_call(lambda: a @ a, device, flush)
    assert 0 < timed.ms <= timed.bound_ms and timed.overwrite_ms > 0


@gpu
@needs_gpu
def test_bound_covers_side_stream_work_that_overlaps_the_l2_overwrite():
    """Work on a private stream does not wait for the cold-L2 overwrite, so it can run mostly before the
    start event; the upper bound must still cover it (it saw ~3 ms of a 35 ms side-stream GEMM before)."""
    from fibserve.bench.worker.clock import PRE_CALL_MS, ColdL2, time_call

    device = torch.device("cuda:0")
    flush = ColdL2(device)
    assert 0.8 * PRE_CALL_MS <= flush.plan.solo_ms < 1.0
    a = torch.randn(8192, 8192, device=device)
    time_call(lambda: a @ a, device, flush)  # the first call pays for cuBLAS's set-up
    main_ms = time_call(lambda: a @ a, device, flush).ms
    side = torch.cuda.Stream(device)

    def on_side_stream() -> None:
        with torch.cuda.stream(side):
            a @ a

    for _ in range(3):
        timed = time_call(on_side_stream, device, flush)
        assert timed.ms < 0.25 * main_ms
        assert timed.bound_ms >= 0.8 * main_ms, (timed, main_ms)


@gpu
@needs_gpu
def test_device_snapshot_reads_clocks():
    from fibserve.bench.device import snapshot

    snap = snapshot("cuda:0")
    assert "NVIDIA" in snap.name and snap.source != "none"
    assert snap.sm_clock_mhz is None or snap.sm_clock_mhz > 0


@gpu
@needs_gpu
def test_cuda_ipc_buffers_roundtrip_through_a_worker(trace_set, make_solution):
    """A Python candidate in a sandbox worker reads inputs the trusted side wrote through CUDA IPC and its
    outputs come back the same way: PASSED with GPU timing."""
    from fibserve.bench import Evaluator

    definition = trace_set.definition("vector_add_f32")
    workloads = trace_set.workloads_for("vector_add_f32")[:2]
    with Evaluator("cuda:0") as ev:
        report = ev.evaluate(
            definition,
            make_solution("add_torch_returning.py", "vector_add_f32", language="python", dps=False),
            workloads,
            overrides={"iterations": 10, "trials": 2},
        )
    assert report.task_error is None, report.task_error
    for trace in report.traces:
        assert trace.evaluation.status is EvaluationStatus.PASSED
        extra = trace.evaluation.performance.extra
        assert extra["measured_on"] == "gpu" and extra["pairs"] == 20
        assert extra["device_start"]["name"].startswith("NVIDIA")
        assert trace.evaluation.correctness.extra["timed_outputs_validated"] >= 2 * 3  # plus sampled calls


@needs_gpu
@gpu
def test_pointer_cache_python_candidate_is_caught_on_gpu(trace_set, make_solution):
    from fibserve.bench import Evaluator

    definition = trace_set.definition("vector_add_f32")
    workloads = trace_set.workloads_for("vector_add_f32")[:1]
    with Evaluator("cuda:0", warm_spare=False) as ev:
        report = ev.evaluate(
            definition, make_solution("add_pointer_cache.py", "vector_add_f32", language="python"), workloads
        )
    assert report.traces[0].evaluation.status is EvaluationStatus.INCORRECT_NUMERICAL


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_evaluator_without_a_gpu_says_so():
    from fibserve.bench import Evaluator

    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        Evaluator("cuda:0")
