"""/compile (static analysis, no GPU), /sanitize and /profile through a real server.

Without a GPU, /sanitize and /profile are accepted and fail at the task level with a clear message. The
``gpu`` tests run on the H200 (scripts/gpu_suite.sh): a planted out-of-bounds write is reported by memcheck
with its source line, and ncu names the profiled kernel.
"""

from __future__ import annotations

import shutil

import pytest
from fibserve.client import FIBServeClient
from serve_helpers import VECTOR_ADD_SMALL, triton_add_solution

CUDA_ADD = """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <cuda_runtime.h>

// z = x + y; x, y, z: [n] float32. OVERRUN extra threads write past the end of z when nonzero.
__global__ void vector_add_kernel(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n + OVERRUN) z[i] = x[i % n] + y[i % n];
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  int64_t n = x.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  int64_t threads = n + OVERRUN;
  vector_add_kernel<<<(threads + 255) / 256, 256, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<const float*>(y.data_ptr()),
      static_cast<float*>(z.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""

OOB_LINE = 9
"""Line of the store in CUDA_ADD (the planted out-of-bounds write)."""


def cuda_add(name: str, overrun: int = 0) -> dict:
    """A tvm-ffi CUDA solution of vector_add_f32; ``overrun > 0`` plants an out-of-bounds write."""
    body = f"#define OVERRUN {overrun}\n" + CUDA_ADD
    return {
        "name": name,
        "definition": "vector_add_f32",
        "author": "tests",
        "spec": {
            "language": "cuda",
            "target_hardware": ["NVIDIA_H100", "NVIDIA_H200"],
            "entry_point": "kernel.cu::run",
            "binding": "tvm-ffi",
        },
        "sources": [{"path": "kernel.cu", "content": body}],
    }


@pytest.mark.nvcc
@pytest.mark.slow
def test_compile_a_cuda_candidate_without_a_gpu(shared_server) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    with FIBServeClient(shared_server.url, timeout=60) as client:
        analysis = client.compile(cuda_add("cuda add"))
        broken = client.compile(
            cuda_add("cuda broken") | {"sources": [{"path": "kernel.cu", "content": "void run(\n"}]}
        )
    assert analysis.status == "clean", analysis.build.log if analysis.build else analysis.notes
    assert analysis.arch == "sm_90a" and analysis.executed is False
    kernel = next(k for k in analysis.kernels if "vector_add_kernel" in k.display_name)
    assert kernel.resources is not None and kernel.resources.registers > 0
    assert broken.status == "compile_error" and broken.build is not None and "kernel.cu" in broken.build.log


def test_compile_of_a_python_solution_answers_at_once(shared_server) -> None:
    solution = triton_add_solution(name="py", body="def run(x, y, z):\n    z.copy_(x + y)\n")
    solution["spec"]["language"] = "python"
    with FIBServeClient(shared_server.url) as client:
        analysis = client.compile(solution)
    assert analysis.status == "clean" and analysis.language == "python" and analysis.solution == "py"


def test_sanitize_and_profile_without_a_gpu_fail_at_the_task_level(shared_server) -> None:
    with FIBServeClient(shared_server.url) as client:
        sanitize = client.wait(client.submit_sanitize(cuda_add("s"), [VECTOR_ADD_SMALL]), timeout=120)
        profile = client.wait(
            client.submit_profile(cuda_add("p"), [VECTOR_ADD_SMALL], sections=["SpeedOfLight"]), timeout=120
        )
    for answer, tool in ((sanitize, "compute-sanitizer"), (profile, "ncu")):
        assert answer.status == "failed" and answer.error is not None
        assert answer.error.code == "tool_unavailable"
        assert tool in answer.error.message
        assert (
            "not available on this server" in answer.error.message
            or "needs a CUDA GPU" in answer.error.message
        )


@pytest.mark.gpu
def test_memcheck_reports_a_planted_out_of_bounds_write_with_its_line(start_server) -> None:
    server = start_server("--devices", "cuda:0")
    with FIBServeClient(server.url, timeout=60) as client:
        clean = client.wait(client.submit_sanitize(cuda_add("clean"), [VECTOR_ADD_SMALL]), timeout=600)
        bad = client.wait(
            client.submit_sanitize(
                cuda_add("oob", overrun=64), [VECTOR_ADD_SMALL], sanitizer_types=["memcheck"]
            ),
            timeout=600,
        )
    assert clean.status == "completed", clean.error
    assert [r.verdict for r in clean.sanitizer or []] == ["clean"]
    assert bad.status == "completed", bad.error
    (run,) = bad.sanitizer or []
    assert run.verdict == "errors" and not run.passed and (run.error_count or 0) > 0
    assert "Invalid __global__ write" in run.output
    assert f"kernel.cu:{OOB_LINE + 1}" in run.output  # +1: the #define line the test prepends


@pytest.mark.gpu
def test_ncu_profiles_the_measured_call_and_names_the_kernel(start_server) -> None:
    server = start_server("--devices", "cuda:0")
    with FIBServeClient(server.url, timeout=60) as client:
        answer = client.wait(
            client.submit_profile(cuda_add("prof"), [VECTOR_ADD_SMALL], sections=["SpeedOfLight"]),
            timeout=600,
        )
    assert answer.status == "completed", answer.error
    (run,) = answer.profile or []
    assert run.ok, (run.note, run.report[-2000:])
    assert len(run.kernels) == 1 and "vector_add_kernel" in run.kernels[0]  # only the measured call
    assert "Speed Of Light" in run.report


@pytest.mark.gpu
def test_evaluate_a_cuda_candidate_on_the_gpu(start_server) -> None:
    server = start_server("--devices", "cuda:0")
    with FIBServeClient(server.url, timeout=60) as client:
        answer = client.evaluate(cuda_add("gpu add"), [VECTOR_ADD_SMALL], wait_timeout=900)
    assert answer.status == "completed", answer.error
    assert answer.executed is True and answer.device == "cuda:0"
    (trace,) = answer.traces or []
    assert trace.evaluation is not None and trace.evaluation.status.value == "PASSED", trace.evaluation
    assert trace.evaluation.performance is not None and trace.evaluation.performance.latency_ms > 0
