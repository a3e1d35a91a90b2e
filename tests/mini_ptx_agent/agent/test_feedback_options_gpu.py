"""GPU: the agent's feedback options against a real FIBServe on cuda:0 (Nsight Compute and compute-sanitizer).

- the bundled reference TMA + wgmma GEMM with ``instruction_evidence``, ``profile_in_loop`` and
  ``require_architecture``: the feedback says wgmma and TMA executed, has the profile line, and the turn submits;
- a SIMT vector add: the feedback says no target family executed, and ``require_architecture`` keeps it from
  submitting however fast it is;
- the sanitizer gate on a planted out-of-bounds write: the feedback quotes the line; on a kernel that does not
  build: the compile error, not a sanitizer verdict.

Run on the GPU machine: ``pytest -m gpu -n 0 tests/mini_ptx_agent/agent/test_feedback_options_gpu.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fibserve.datasets import default_root
from fibserve.trace.trace_set import TraceSet
from mini_ptx_agent.environment.embedded import EmbeddedService
from mini_ptx_agent.environment.evaluation import EvaluationEnvironment
from mini_ptx_agent.environment.fibserve import FIBServeBackend
from mini_ptx_agent.feedback_options import FeedbackOptions
from mini_ptx_agent.task import TaskConfig

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(1200)]

GEMM = "gemm_n7168_k5120"
GEMM_M70 = "3817345d-2b16-47dc-ae55-710bf42cfd86"
VECTOR_ADD_SMALL = "fea76944-a9e9-5a63-b79f-53eb46ecdafd"
OPTIONS = FeedbackOptions(instruction_evidence=True, profile_in_loop=True, require_architecture=True)

SIMT_ADD = """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* x, const float* y, float* z, int64_t n, int64_t extra) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n + extra) z[i] = x[i % n] + y[i % n];
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  int64_t n = x.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  add_kernel<<<(n + EXTRA + 255) / 256, 256, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<const float*>(y.data_ptr()),
      static_cast<float*>(z.data_ptr()), n, EXTRA);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    with EmbeddedService(devices=["cuda:0"]) as running:
        assert running.url
        yield running.url


def test_the_reference_gemm_shows_wgmma_and_tma_executed_and_submits(service: str, tmp_path: Path) -> None:
    task = TaskConfig(
        definition=GEMM, language="cuda", workloads=[GEMM_M70], target_speedup=0.01, timeout_s=600
    )
    (solution,) = [
        s
        for s in TraceSet.load(default_root()).solutions_for(GEMM)
        if s.name == "gemm_n7168_k5120_ptxbench_cuda_wgmma_tma"
    ]
    env = EvaluationEnvironment(FIBServeBackend(service), task, OPTIONS, ncu_cache_dir=tmp_path)
    out = env.execute(
        {"solution": task.solution(solution.sources[0].content, name="gemm-evidence"), "turn": 1}
    )
    text = out["output"]
    assert "Target families that executed: wgmma, TMA." in text and "HGMMA" in text, text
    assert "Profile (Nsight Compute, workload 3817345d-2b1" in text, text
    assert out["extra"]["submit"] is True, text


def test_a_simt_kernel_shows_no_family_executed_and_does_not_submit(service: str, tmp_path: Path) -> None:
    task = TaskConfig(
        definition="vector_add_f32", language="cuda", workloads=[VECTOR_ADD_SMALL], target_speedup=0.01
    )
    env = EvaluationEnvironment(FIBServeBackend(service), task, OPTIONS, ncu_cache_dir=tmp_path)
    out = env.execute({"solution": task.solution("#define EXTRA 0\n" + SIMT_ADD, name="simt"), "turn": 1})
    text = out["output"]
    assert "none of the tracked opcodes. Target families that executed: none." in text, text
    assert "ARCHITECTURE WARNING" in text and "VERDICT: FAST ENOUGH, ARCHITECTURE MISSING" in text, text
    assert out["extra"]["submit"] is False


def test_the_sanitizer_gate_quotes_the_out_of_bounds_line(service: str) -> None:
    task = TaskConfig(
        definition="vector_add_f32", language="cuda", workloads=[VECTOR_ADD_SMALL], sanitizer=True,
        sanitizer_types=["memcheck"],
    )  # fmt: skip
    env = EvaluationEnvironment(FIBServeBackend(service), task, FeedbackOptions(sanitizer_gate=["memcheck"]))
    out = env.execute({"solution": task.solution("#define EXTRA 64\n" + SIMT_ADD, name="oob"), "turn": 1})
    text = out["output"]
    assert "memcheck, workload fea76944-a9e: Invalid __global__ write" in text, text
    assert (
        "at kernel.cu:9 (add_kernel" in text and "): if (i < n + extra) z[i] = x[i % n] + y[i % n];" in text
    ), text
    assert text.splitlines()[-1].startswith("VERDICT: REJECTED")


def test_a_kernel_that_does_not_build_gets_its_compile_error_not_a_sanitizer_verdict(service: str) -> None:
    task = TaskConfig(
        definition="vector_add_f32", language="cuda", workloads=[VECTOR_ADD_SMALL], sanitizer=True,
        sanitizer_types=["memcheck"],
    )  # fmt: skip
    env = EvaluationEnvironment(FIBServeBackend(service), task, FeedbackOptions(sanitizer_gate=["memcheck"]))
    out = env.execute({"solution": task.solution("void run(\n", name="broken"), "turn": 1})
    report = out["extra"]["report"]
    assert report.status.value == "COMPILE_ERROR" and report.sanitizer is None, out["output"]
    assert "Compile log:" in out["output"]
