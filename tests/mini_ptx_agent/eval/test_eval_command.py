"""`ptxbench eval KERNEL --task-config task.json`: the real command against a real CPU-mode FIBServe.

Exit 0 for any kernel verdict, 2 for an infrastructure error (or a task config that cannot be used).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_ptx_agent.environment.embedded import EmbeddedService, free_port

pytestmark = pytest.mark.slow

WORKLOAD = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"  # vector_add_f32, N = 1024

TRITON_ADD = """\
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(x, y, z):
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
"""

CUDA_ADD = """\
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

__global__ void add_kernel(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  int64_t n = x.size(0);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(x.data_ptr()),
      static_cast<const float*>(y.data_ptr()), static_cast<float*>(z.data_ptr()), n);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""


@pytest.fixture(scope="module")
def fibserve() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        assert service.url
        yield service.url


def ptxbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "ptxbench"
    full_env = {k: v for k, v in os.environ.items() if k != "SERVICE_URL"} | (env or {})
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600, env=full_env)


def write_task(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "task.json"
    path.write_text(
        json.dumps({"definition": "vector_add_f32", "language": "triton", "workloads": [WORKLOAD]} | fields)
    )
    return path


def test_correct_triton_kernel_json(fibserve: str, tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    result = ptxbench(
        "eval", str(kernel), "--task-config", str(write_task(tmp_path)), "--service-url", fibserve, "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # nothing but JSON on stdout
    assert report["schema"] == "ptxbench.eval.v1"
    assert report["status"] == "PASSED" and report["all_passed"] is True
    assert (
        report["executed_on_gpu"] is False and report["target_met"] is False and report["min_speedup"] is None
    )
    assert [t["workload"]["uuid"] for t in report["traces"]] == [WORKLOAD]
    assert report["traces"][0]["evaluation"]["status"] == "PASSED"


def test_wrong_kernel_is_a_verdict_not_an_error(fibserve: str, tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD.replace("+ tl.load(y_ptr", "* tl.load(y_ptr"))
    result = ptxbench(
        "eval", str(kernel), "--task-config", str(write_task(tmp_path)), "--service-url", fibserve, "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "INCORRECT_NUMERICAL" and report["all_passed"] is False
    assert report["workloads"][0]["max_absolute_error"] > 0


def test_service_down_exits_2_with_infrastructure_error(tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    dead = f"http://127.0.0.1:{free_port()}"
    result = ptxbench(
        "eval", str(kernel), "--task-config", str(write_task(tmp_path)), "--json", env={"SERVICE_URL": dead}
    )
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["status"] == "INFRASTRUCTURE_ERROR" and "unreachable" in report["error"]
    assert report["traces"] == [] and report["all_passed"] is False


def test_a_python_file_for_a_cuda_task_is_refused_before_any_build(tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    result = ptxbench("eval", str(kernel), "--task-config", str(write_task(tmp_path, language="cuda")))
    assert result.returncode == 2
    assert "kernel.py does not look like a cuda kernel (expected .cu" in result.stderr
    assert "identifier" not in result.stderr + result.stdout  # never reached nvcc


def test_invalid_task_config_names_the_field(tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    result = ptxbench(
        "eval", str(kernel), "--task-config", str(write_task(tmp_path, target_speedup=-1)), "--json"
    )
    assert result.returncode == 2
    assert "target_speedup" in result.stderr and result.stdout == ""


def test_embedded_service_and_human_output(tmp_path: Path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    result = ptxbench("eval", str(kernel), "--task-config", str(write_task(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "Evaluation of your kernel (triton, definition vector_add_f32): PASSED" in result.stdout
    assert "VERDICT: CORRECT (not timed on a GPU)" in result.stdout


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cuda_kernel_without_gpu_is_built_and_analysed_but_not_executed(
    fibserve: str, tmp_path: Path
) -> None:
    kernel = tmp_path / "kernel.cu"
    kernel.write_text(CUDA_ADD)
    task = write_task(tmp_path, language="cuda")
    result = ptxbench("eval", str(kernel), "--task-config", str(task), "--service-url", fibserve, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "NOT_EXECUTED" and not report["all_passed"] and not report["target_met"]
    analysis = report["static_analysis"]
    assert analysis["compiled"] is True and analysis["registers"] > 0 and analysis["spill_bytes"] == 0
    assert "not executed" in report["notes"]


def test_sanitizer_gate_without_compute_sanitizer_is_an_infrastructure_error(
    fibserve: str, tmp_path: Path
) -> None:
    if shutil.which("compute-sanitizer"):
        pytest.skip("compute-sanitizer is installed here; this test covers a service that lacks it")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TRITON_ADD)
    task = write_task(tmp_path, sanitizer=True)
    result = ptxbench("eval", str(kernel), "--task-config", str(task), "--service-url", fibserve, "--json")
    assert result.returncode == 2, result.stdout
    report = json.loads(result.stdout)
    assert report["status"] == "INFRASTRUCTURE_ERROR"
    assert "sanitize" in report["error"] and "tool_unavailable" in report["error"]
