"""CUDA candidates in the final sandbox (issue 14): honest ones pass, and a hostile one's host code cannot see
other processes, read the server's token or environment, reach the network or leave an orphan behind.

The hostile kernel (``kernels/hostile_probe.cu``) is compiled here too (marked ``nvcc``, through the shared
build cache); the evaluations are marked ``gpu`` and run on the H200 (scripts/gpu_validate.sh).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import KERNELS
from fibserve.trace import EvaluationStatus, Solution
from sandbox_probes import wait_until_gone

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
TOKEN = f"fibserve-gpu-token-{os.getpid()}-c0ffee"
MARKER = f"fibserve-cuda-orphan-{os.getpid()}"


def _cuda(name: str, source: str) -> Solution:
    spec = {
        "language": "cuda",
        "target_hardware": ["sm_90a"],
        "entry_point": "kernel.cu::run",
        "binding": "tvm-ffi",
    }
    return Solution.model_validate(
        {"name": name, "definition": "vector_add_f32", "author": "fibserve tests", "spec": spec,
         "sources": [{"path": "kernel.cu", "content": source}]}
    )  # fmt: skip


def hostile(port: int) -> Solution:
    """The probe with this test's token (reversed), listener port and orphan marker filled in."""
    source = (KERNELS / "hostile_probe.cu").read_text()
    for placeholder, value in {
        "@TOKEN_REVERSED@": TOKEN[::-1],
        "@PORT@": str(port),
        "@MARKER@": MARKER,
    }.items():
        source = source.replace(placeholder, value)
    return _cuda("hostile_probe", source)


@pytest.mark.nvcc
def test_the_hostile_cuda_probe_builds(build_cache: Path) -> None:
    from fibserve.build import build_solution

    result = build_solution(hostile(12345), cache_dir=build_cache)
    assert result.ok, result.log


@pytest.mark.gpu
@needs_gpu
def test_a_cuda_candidates_host_code_is_confined(trace_set) -> None:
    from fibserve.bench import Evaluator

    server = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", "serve", "--token", TOKEN],
        env={**os.environ, "OPENAI_API_KEY": TOKEN},
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    definition = trace_set.definition("vector_add_f32")
    workloads = trace_set.workloads_for("vector_add_f32")[:1]
    try:
        with Evaluator("cuda:0", warm_spare=False) as evaluator:
            report = evaluator.evaluate(definition, hostile(listener.getsockname()[1]), workloads)
        orphans = wait_until_gone(MARKER)
    finally:
        server.kill()
        server.wait()
        listener.close()
    assert report.sandbox == "bwrap", report.notes
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log[-2000:]
    findings = json.loads(evaluation.log.rsplit("FINDINGS ", 1)[1].splitlines()[0])
    assert findings["uid"] == 65534
    assert findings["processes"] < 10, findings  # its own PID namespace
    assert findings["token_holders"] == 0 and findings["shadow"] is False and findings["network"] is False
    assert TOKEN not in report.model_dump_json()
    assert orphans == []


@pytest.mark.gpu
@needs_gpu
def test_an_honest_cuda_candidate_passes_in_the_sandbox(trace_set) -> None:
    from fibserve.bench import Evaluator

    source = (KERNELS.parent.parent / "kernels" / "simt_add.cu").read_text()
    definition = trace_set.definition("vector_add_f32")
    workloads = trace_set.workloads_for("vector_add_f32")[:2]
    with Evaluator("cuda:0") as evaluator:
        report = evaluator.evaluate(definition, _cuda("simt_add", source), workloads, overrides={"trials": 2})
    assert report.sandbox == "bwrap" and report.task_error is None, (report.task_error, report.notes)
    assert all(t.evaluation.status is EvaluationStatus.PASSED for t in report.traces), report.notes
    assert all(t.evaluation.performance.extra["measured_on"] == "gpu" for t in report.traces)
