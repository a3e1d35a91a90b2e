"""The cold-L2 gate's release on the GPU (fibserve.bench.worker.clock.time_call): a timed call is queued whole
behind the gate before the GPU reaches it, so the host's time to launch it is never timed, and a call that waits
on the GPU from the host falls back to timing without the release instead of hanging."""

from __future__ import annotations

import statistics
import time

import pytest
import torch

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

HOST_DELAY_S = 0.00018
"""A host that takes 0.18 ms to launch (a worker waking from a long sleep, a loaded CPU): beyond the 0.1 ms
overwrite, within what the release absorbs (``RELEASE_HOST_MS``)."""


def _median_ms(fn, flush, calls: int = 20) -> float:
    from fibserve.bench.worker.clock import time_call

    device = torch.device("cuda:0")
    return statistics.median(time_call(fn, device, flush).ms for _ in range(calls))


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


@gpu
@needs_gpu
def test_a_slow_host_launch_is_not_timed_with_the_release_and_is_without_it():
    from fibserve.bench.worker.clock import ColdL2

    device = torch.device("cuda:0")
    released = ColdL2(device)
    assert released.gate is not None and released.gate.releasable and released.waits
    unreleased = ColdL2(device, released.plan._replace(release=False))
    assert not unreleased.waits
    x, y = (torch.randn(1 << 16, device=device) for _ in range(2))
    out = torch.empty_like(x)

    def add() -> None:
        torch.add(x, y, out=out)

    def slow_add() -> None:
        _spin(HOST_DELAY_S)
        torch.add(x, y, out=out)

    fast = _median_ms(add, released)  # its first call may stall the release once (the kernel's lazy loading)
    assert fast < 0.05  # a 65536-element add: a few microseconds
    assert _median_ms(slow_add, released) < fast + 0.005
    assert released.waits and released.released  # no call stalled the gate or kept it waiting too long
    # the defence failing: without the release, the host's delay beyond the overwrite is timed as GPU work
    assert _median_ms(slow_add, unreleased) > fast + 0.03


@gpu
@needs_gpu
def test_a_host_too_slow_for_the_release_is_timed_as_before():
    """A call that keeps the gate waiting longer than RELEASE_HOST_MS (2 ms of host time here) on most calls
    turns the release off: its host time is then in its latency, so the trusted side's round-trip check
    (which cannot see time spent waiting in the gate) does not refuse an honest but host-bound candidate."""
    from fibserve.bench.worker.clock import SLOW_OF_WINDOW, SLOW_WINDOW, ColdL2, time_call

    device = torch.device("cuda:0")
    flush = ColdL2(device)
    x = torch.randn(1 << 16, device=device)
    for _ in range(1 + SLOW_WINDOW):  # the kernel's first launch, then a window of quick calls
        time_call(lambda: x.add_(1), device, flush)
    assert flush.waits
    for _ in range(SLOW_OF_WINDOW - 1):
        time_call(lambda: (_spin(0.002), x.add_(1)), device, flush)
    assert flush.waits  # a passing delay of the host: the release absorbs it
    time_call(lambda: (_spin(0.002), x.add_(1)), device, flush)
    assert not flush.waits
    assert time_call(lambda: (_spin(0.002), x.add_(1)), device, flush).ms > 1.5


@gpu
@needs_gpu
def test_a_call_that_waits_on_the_gpu_from_the_host_is_timed_without_the_release():
    from fibserve.bench.worker.clock import RELEASE_WAIT_MS, STALLS_BEFORE_OFF, ColdL2, time_call

    device = torch.device("cuda:0")
    flush = ColdL2(device)
    assert flush.waits
    x = torch.randn(1 << 20, device=device)

    def syncing() -> None:
        (x * 2).sum().item()  # the host waits for the GPU, which waits at the gate for the host

    started = time.perf_counter()
    stalled = [time_call(syncing, device, flush) for _ in range(STALLS_BEFORE_OFF)]
    # each gave the gate up after RELEASE_WAIT_MS (no hang) and was timed again without the release
    assert time.perf_counter() - started < 1.0
    assert all(0 < t.ms < RELEASE_WAIT_MS for t in stalled)
    assert not flush.waits  # after that many stalls in a row the flush stops using the release
    later = [time_call(syncing, device, flush) for _ in range(5)]
    assert all(0 < t.ms <= t.bound_ms < 5.0 for t in later)


@gpu
@needs_gpu
def test_stalls_in_warm_up_calls_leave_the_release_on():
    """A kernel's first launch or a library's first workspace allocation stalls the release in the warm-up; on
    the H100 a twin's release was off for most calls of the first evaluation of M=8192 (twelfth session)."""
    from fibserve.bench.worker.clock import STALLS_BEFORE_OFF, ColdL2, time_call

    device = torch.device("cuda:0")
    flush = ColdL2(device)
    x = torch.randn(1 << 20, device=device)

    def syncing() -> None:
        (x * 2).sum().item()

    warm = [time_call(syncing, device, flush, warmup=True) for _ in range(STALLS_BEFORE_OFF + 1)]
    assert all(t.attempts == 2 for t in warm)  # each stalled and was timed again
    assert flush.waits
    for _ in range(STALLS_BEFORE_OFF):  # the same stalls in timed calls turn it off
        time_call(syncing, device, flush)
    assert not flush.waits


@gpu
@needs_gpu
def test_an_evaluation_says_which_side_was_timed_behind_the_release(trace_set, make_solution, tmp_path):
    """A candidate that waits on the GPU from the host in its call (``.item()``) cannot be queued behind the
    release; its result says so, and the baseline's calls (torch.add, queued whole) were released."""
    from fibserve.bench import Evaluator
    from fibserve.trace import EvaluationStatus, TimingFacts

    definition = trace_set.definition("vector_add_f32")
    workloads = [w for w in trace_set.workloads_for("vector_add_f32") if w.axes["N"] == 65536][:1]
    syncing = tmp_path / "add_syncing.py"
    syncing.write_text(
        "import torch\n\n\ndef run(x, y, z):\n    torch.add(x, y, out=z)\n    z.sum().item()\n"
    )
    with Evaluator("cuda:0") as ev:
        for kernel, language, released in (("add_correct.py", "triton", True), (syncing, "python", False)):
            report = ev.evaluate(
                definition,
                make_solution(kernel, "vector_add_f32", language=language),
                workloads,
                baseline=trace_set.baseline_for("vector_add_f32"),
                overrides={"iterations": 10, "trials": 2},
            )
            evaluation = report.traces[0].evaluation
            assert evaluation.status is EvaluationStatus.PASSED, report.task_error or evaluation
            overwrite = TimingFacts.of(evaluation.performance).l2_overwrite
            assert overwrite.release and overwrite.reference_released
            assert overwrite.candidate_released is released


def _cupti_add_us(cupti_us, n: int) -> float:
    """Median device time (us) of ``torch.add`` on two float32 vectors of ``n`` as CUPTI records its kernel,
    each call timed as a worker times it, behind the cold-L2 gate (``benchmarks/short_kernels.py``'s
    ``cupti_us``, which the benchmarks compare with too)."""
    from fibserve.bench.worker.clock import ColdL2

    device = torch.device("cuda:0")
    x, y = (torch.randn(n, device=device) for _ in range(2))
    out = torch.empty_like(x)
    return cupti_us(lambda: torch.add(x, y, out=out), ColdL2(device))


@gpu
@needs_gpu
def test_a_short_kernel_is_timed_within_15_percent_of_its_cupti_time(
    trace_set, make_solution, load_benchmark, monkeypatch
):
    """Issue 35's goal for short kernels: the baseline of vector_add_f32 at N=65536 (torch.add, about 1.6 us on
    the H200) is reported by its CUPTI span; with the spans off (``FIBSERVE_KERNEL_SPAN=0``) the CUDA events
    add their own 2.4 to 3.1 us and it reads more than twice that."""
    from fibserve.bench import Evaluator
    from fibserve.trace import EvaluationStatus, TimingFacts

    definition = trace_set.definition("vector_add_f32")
    workloads = [w for w in trace_set.workloads_for("vector_add_f32") if w.axes["N"] == 65536][:1]
    cupti_ms = _cupti_add_us(load_benchmark("short_kernels.py").cupti_us, 65536) / 1e3
    measured = {}
    for spans in ("1", "0"):
        monkeypatch.setenv("FIBSERVE_KERNEL_SPAN", spans)
        with Evaluator("cuda:0") as ev:
            report = ev.evaluate(
                definition,
                make_solution("add_correct.py", "vector_add_f32", language="triton"),
                workloads,
                baseline=trace_set.baseline_for("vector_add_f32"),
                overrides={"iterations": 20, "trials": 2},
            )
        evaluation = report.traces[0].evaluation
        assert evaluation.status is EvaluationStatus.PASSED, report.task_error or evaluation
        facts = TimingFacts.of(evaluation.performance)
        measured[spans] = (facts.timing_basis, evaluation.performance.reference_latency_ms)
    assert measured["1"][0] == "device" and measured["0"][0] == "events"
    assert measured["1"][1] <= 1.15 * cupti_ms, (measured, cupti_ms)
    assert measured["0"][1] > 1.5 * cupti_ms, (measured, cupti_ms)  # what the spans take out
