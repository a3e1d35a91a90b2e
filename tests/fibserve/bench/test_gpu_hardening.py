"""The defences of issue 20 that need a GPU, each with the attack it stops (marked ``gpu``: run on the H200 by
``scripts/gpu_validate.sh hardening``; the kernels also build here, marked ``nvcc``)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch
from fibserve.trace import EvaluationStatus, Solution
from kernel_fixtures import cuda_solution

KERNELS = Path(__file__).resolve().parent / "kernels"
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
VECTOR_ADD = "vector_add_f32"


def _hog() -> Solution:
    return cuda_solution((KERNELS / "add_hogs_gpu_memory.cu").read_text(), name="hog", definition=VECTOR_ADD)


def _python(name: str, source: str) -> Solution:
    return Solution.model_validate({"name": name, "definition": VECTOR_ADD, "author": "fibserve tests",
                                    "spec": {"language": "python", "target_hardware": ["sm_90a"],
                                             "entry_point": "kernel.py::run"},
                                    "sources": [{"path": "kernel.py", "content": source}]})  # fmt: skip


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory):
    """One Evaluator for the module, without the source policy (the attacks use threads and ctypes; only an
    operator can switch it off)."""
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    from fibserve.bench import Evaluator

    path = tmp_path_factory.mktemp("config") / "no-policy.yaml"
    path.write_text("defaults:\n  enforce_source_policy: false\n")
    with Evaluator("cuda:0", config_path=path) as ev:
        yield ev


@pytest.mark.nvcc
def test_the_memory_hog_builds(build_cache: Path) -> None:
    from fibserve.build import build_solution

    assert build_solution(_hog(), cache_dir=build_cache).ok


@gpu
@needs_gpu
def test_a_candidate_that_takes_the_gpus_memory_from_the_twin_is_blamed_not_the_harness(
    trace_set, evaluator
) -> None:
    """Item 1: the twin cannot allocate next to the hog, works once the hog's worker is gone: RUNTIME_ERROR."""
    definition = trace_set.definition(VECTOR_ADD)
    report = evaluator.evaluate(definition, _hog(), trace_set.workloads_for(VECTOR_ADD)[:1],
                                baseline=trace_set.baseline_for(VECTOR_ADD))  # fmt: skip
    again = evaluator.evaluate(definition, cuda_solution((KERNELS.parent.parent / "kernels" / "simt_add.cu")
                               .read_text(), name="simt_add", definition=VECTOR_ADD),
                               trace_set.workloads_for(VECTOR_ADD)[:1], baseline=trace_set.baseline_for(VECTOR_ADD))  # fmt: skip
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log[-2000:]
    assert evaluation.log.startswith("interfered with the timing twin"), evaluation.log[-2000:]
    assert again.task_error is None and again.traces[0].evaluation.status is EvaluationStatus.PASSED


BURNER = """
import threading, time, torch

_burner = []


def _burn():
    stream = torch.cuda.Stream()
    while True:
        with torch.cuda.stream(stream):
            for _ in range(8):
                torch.cuda._sleep(2_000_000)  # about 1 ms of spinning each at 2 GHz
        time.sleep(0.001)


def run(x, y, z):
    if not _burner:
        _burner.append(threading.Thread(target=_burn, daemon=True))
        _burner[0].start()
    torch.add(x, y, out=z)
"""


@gpu
@needs_gpu
def test_gpu_work_left_running_after_the_reply_is_refused(trace_set, evaluator) -> None:
    """Item 2: a host thread keeps GPU work queued from another stream; the twin would be timed beside it.

    Refused either by the busy probe before a comparator call or, when the candidate's paused sandbox holds the
    work back until its own calls, by the round-trip check of those calls (seen on the H200, 2026-12-02): both
    are RUNTIME_ERROR, the candidate's."""
    definition = trace_set.definition(VECTOR_ADD)
    report = evaluator.evaluate(definition, _python("burner", BURNER), trace_set.workloads_for(VECTOR_ADD)[:1],
                                baseline=trace_set.baseline_for(VECTOR_ADD))  # fmt: skip
    evaluation = report.traces[0].evaluation
    assert report.task_error is None, report.task_error
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log[-2000:]
    assert "device was busy" in evaluation.log or "do not account for its calls" in evaluation.log


@gpu
@needs_gpu
def test_the_probe_is_idle_on_an_idle_device_and_the_candidate_is_paused_for_honest_runs(
    trace_set, evaluator
) -> None:
    """Item 2's calibration: an honest evaluation's probes stay under BUSY_PROBE_MS."""
    from fibserve.bench.timing import guard

    source = (KERNELS.parent.parent / "kernels" / "simt_add.cu").read_text()
    definition = trace_set.definition(VECTOR_ADD)
    report = evaluator.evaluate(definition, cuda_solution(source, name="simt_add", definition=VECTOR_ADD),
                                trace_set.workloads_for(VECTOR_ADD)[:1], baseline=trace_set.baseline_for(VECTOR_ADD))  # fmt: skip
    extra = report.traces[0].evaluation.performance.extra
    print("busy probe", extra["busy_probe_ms"], "neighbour bias", extra["neighbour_bias"])
    assert extra["comparators_timed_with_candidate_paused"]
    assert extra["busy_probe_ms"]["median"] < guard.BUSY_PROBE_MS


SETS_CARVEOUT = r"""
import ctypes, re, torch

_lib = []


def run(x, y, z):
    if not _lib:
        maps = open("/proc/self/maps").read()
        _lib.append(ctypes.CDLL(sorted(set(re.findall(r"(/\S*libcudart\.so[.\d]*)", maps)))[0]))
    # set aside all the L2 it may for persisting accesses, as a kernel keeping its inputs in L2 would
    _lib[0].cudaDeviceSetLimit(0x06, ctypes.c_size_t(4 << 20))
    torch.add(x, y, out=z)
"""


@gpu
@needs_gpu
def test_persisting_l2_is_cleared_before_every_timed_call(trace_set, evaluator) -> None:
    """Item 3: the carve-out is reset and checked zero before each call; the result says the candidate set one."""
    from fibserve.bench.worker.clock import ColdL2
    from fibserve.bench.worker.l2_state import LIMIT_PERSISTING_L2, _cudart, persisting_l2_bytes

    device = torch.device("cuda:0")
    flush = ColdL2(device)
    # 4 MiB: over the largest carve-out the call fails with cudaErrorInvalidValue (it clamps, and the error stays
    # pending for torch's next check: seen on the H200, where 1 << 40 left 11796480 bytes and the error)
    assert _cudart().cudaDeviceSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(4 << 20)) == 0
    assert persisting_l2_bytes(device) > 0
    flush.clear_persisting()
    assert persisting_l2_bytes(device) == 0
    definition = trace_set.definition(VECTOR_ADD)
    report = evaluator.evaluate(definition, _python("carveout", SETS_CARVEOUT),
                                trace_set.workloads_for(VECTOR_ADD)[:1], baseline=trace_set.baseline_for(VECTOR_ADD))  # fmt: skip
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log[-2000:]
    assert evaluation.performance.extra["persisting_l2"]["candidate_max_bytes"] > 0
    assert any("persisting accesses" in note for note in report.notes)


@gpu
@needs_gpu
def test_the_gate_times_side_stream_work_that_would_finish_during_the_overwrite() -> None:
    """Item 5: work on a private stream short enough to end inside the 0.1 ms overwrite is in the bound."""
    from fibserve.bench.worker.clock import ColdL2, time_call

    device = torch.device("cuda:0")
    gated = ColdL2(
        device
    )  # calibrated as the evaluator's plan is: its solo time is subtracted from the bound
    assert gated.gate is not None and gated.plan.gate, "the gate kernel could not be built"
    a = torch.randn(2048, 2048, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        time_call(lambda: a @ a, device, gated)  # cuBLAS's set-up
    main_ms = sorted(time_call(lambda: a @ a, device, gated).ms for _ in range(20))[10]
    side = torch.cuda.Stream(device)

    def on_side_stream() -> None:
        with torch.cuda.stream(side):
            a @ a

    bounds = sorted(time_call(on_side_stream, device, gated).bound_ms for _ in range(20))
    print("main", main_ms, "side-stream bounds", bounds)
    assert main_ms < 0.1  # it would fit inside the overwrite
    assert bounds[10] >= 0.8 * main_ms, (main_ms, bounds)
