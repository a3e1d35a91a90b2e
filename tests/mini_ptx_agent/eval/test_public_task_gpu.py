"""GPU: a task file in the public PTXBench shape through `ptxbench eval`, with its memcheck gate on cuda:0.

- a correct vector add: the gate runs ``max_check_runs`` (2) times, clean, then the evaluation PASSES, and the
  public verifier's rule (``schema == "ptxbench.eval.v1"`` and ``all_passed``) gives it reward 1;
- a planted out-of-bounds write: the first memcheck run finds it, the gate stops there, the kernel is not timed.

Run on the GPU machine: ``pytest -m gpu -n 0 tests/mini_ptx_agent/eval/test_public_task_gpu.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService
from test_eval_command import CUDA_ADD
from test_task_files import PUBLIC, public_reward

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(1200)]

OUT_OF_BOUNDS = CUDA_ADD.replace("if (i < n) z[i]", "if (i < n) z[i + 64]")
"""The add with every store 64 elements on: the last 64 threads write the 64 floats just past the end of ``z``,
where tests/fibserve/serve's planted overrun writes and memcheck finds it. (Widening the bound instead wrote
nothing out of bounds: the grid covers ``n`` rounded up to 256 threads, and the workload's N is 1024.)"""


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    with EmbeddedService(devices=["cuda:0"]) as running:
        assert running.url
        yield running.url


def _eval(service: str, tmp_path: Path, source: str) -> dict:
    kernel, task = tmp_path / "kernel.cu", tmp_path / "task.json"
    kernel.write_text(source)
    task.write_text(json.dumps(PUBLIC))
    # `python -m mini_ptx_agent`: the GPU machine runs the packages from source, without console scripts
    done = subprocess.run(
        [sys.executable, "-m", "mini_ptx_agent", "eval", str(kernel), "--service-url", service, "--json"],
        capture_output=True, text=True, timeout=900, env=os.environ | {"PTXBENCH_TASK_CONFIG": str(task)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_a_clean_kernel_passes_two_memcheck_runs_then_the_evaluation(service: str, tmp_path: Path) -> None:
    assert OUT_OF_BOUNDS != CUDA_ADD
    report = _eval(service, tmp_path, CUDA_ADD)
    assert report["sanitizer"]["passed"] and report["sanitizer"]["completed_runs"] == 2
    assert report["status"] == "PASSED" and report["executed_on_gpu"] and public_reward(report) == 1


def test_an_out_of_bounds_write_stops_the_gate_at_its_first_run(service: str, tmp_path: Path) -> None:
    report = _eval(service, tmp_path, OUT_OF_BOUNDS)
    assert report["status"] == "SANITIZER_FAILED" and report["traces"] == []
    assert report["sanitizer"]["completed_runs"] == 1 and report["sanitizer"]["requested_runs"] == 2
    assert any("kernel.cu" in place for f in report["sanitizer"]["findings"] for place in f["places"])
    assert public_reward(report) == 0
