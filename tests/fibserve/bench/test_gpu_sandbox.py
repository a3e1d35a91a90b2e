"""CUDA candidates in the final sandbox (issue 14): honest ones pass, and a hostile one's host code cannot see
other processes, read the server's token or environment, reach the network or leave an orphan behind.

The hostile kernel (``kernels/hostile_probe.cu``) is compiled here too (marked ``nvcc``, through the shared
build cache); the evaluations are marked ``gpu`` and run on the H200 (scripts/gpu_validate.sh).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import KERNELS
from fibserve.trace import EvaluationStatus
from kernel_fixtures import cuda_solution
from sandbox_probes import findings_of, hostile_cuda_solution, planted, wait_until_gone

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@pytest.mark.nvcc
def test_the_hostile_cuda_probe_builds(build_cache: Path) -> None:
    from fibserve.build import build_solution

    result = build_solution(
        hostile_cuda_solution("token-to-find", 12345, "orphan-marker"), cache_dir=build_cache
    )
    assert result.ok, result.log


@pytest.mark.gpu
@needs_gpu
def test_a_cuda_candidates_host_code_is_confined(trace_set, tmp_path: Path) -> None:
    from fibserve.bench import Evaluator

    definition = trace_set.definition("vector_add_f32")
    workloads = trace_set.workloads_for("vector_add_f32")[:1]
    with planted(tmp_path) as bait:
        solution = hostile_cuda_solution(bait.token, bait.args["port"], bait.marker)
        with Evaluator("cuda:0", warm_spare=False) as evaluator:
            report = evaluator.evaluate(definition, solution, workloads)
        orphans = wait_until_gone(bait.marker)
    assert report.sandbox == "bwrap", report.notes
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log[-2000:]
    findings = findings_of(evaluation.log)
    assert findings["uid"] == 65534
    assert findings["processes"] < 10, findings  # its own PID namespace
    assert findings["token_holders"] == 0 and findings["shadow"] is False and findings["network"] is False
    assert bait.token not in report.model_dump_json()
    assert orphans == []


@pytest.mark.gpu
@needs_gpu
def test_an_honest_cuda_candidate_passes_in_the_sandbox(trace_set) -> None:
    from fibserve.bench import Evaluator

    source = (KERNELS.parent.parent / "kernels" / "simt_add.cu").read_text()
    solution = cuda_solution(source, name="simt_add", definition="vector_add_f32")
    definition = trace_set.definition("vector_add_f32")
    workloads = trace_set.workloads_for("vector_add_f32")[:2]
    with Evaluator("cuda:0") as evaluator:
        report = evaluator.evaluate(definition, solution, workloads, overrides={"trials": 2})
    assert report.sandbox == "bwrap" and report.task_error is None, (report.task_error, report.notes)
    assert all(t.evaluation.status is EvaluationStatus.PASSED for t in report.traces), report.notes
    assert all(t.evaluation.performance.extra["measured_on"] == "gpu" for t in report.traces)
