"""GPU: what ``POST /profile`` with ``digest`` and ``POST /sanitize`` find in real kernels (one server, cuda:0).

- the bundled reference TMA + wgmma GEMM (``gemm_n7168_k5120_ptxbench_cuda_wgmma_tma``, workload M = 70):
  Nsight Compute counts executed HGMMA and UTMALDG instructions, and the summary has SOL and occupancy;
- a SIMT kernel (vector add): executed instructions, none of them HGMMA, UTMALDG or UTC*;
- the same SIMT kernel with a planted out-of-bounds write: memcheck's finding names kernel.cu and quotes the line.

Run on the GPU machine: ``pytest -m gpu -n 0 tests/fibserve/serve/test_serve_evidence_gpu.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fibserve.client import FIBServeClient
from fibserve.datasets import default_root
from fibserve.trace.trace_set import TraceSet
from serve_helpers import VECTOR_ADD_SMALL, ServerProcess
from test_serve_tools import OOB_LINE, cuda_add

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(1200)]

GEMM = "gemm_n7168_k5120"
GEMM_M70 = "3817345d-2b16-47dc-ae55-710bf42cfd86"
REFERENCE_CUDA = "gemm_n7168_k5120_ptxbench_cuda_wgmma_tma"


@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("evidence") / "state", ["--devices", "cuda:0"])
    server.start()
    yield server
    server.kill()


def reference_gemm() -> dict:
    (solution,) = [s for s in TraceSet.load(default_root()).solutions_for(GEMM) if s.name == REFERENCE_CUDA]
    return solution.model_dump(mode="json")


def digest(server: ServerProcess, solution: dict, workload: str):
    with FIBServeClient(server.url, timeout=60) as client:
        answer = client.wait(client.submit_profile(solution, [workload], digest=True), timeout=900)
    assert answer.status == "completed", answer.error
    (run,) = answer.profile or []
    assert run.ok, (run.note, run.report[-3000:])
    return run


def test_ncu_evidence_names_hgmma_and_utmaldg_for_the_reference_gemm(gpu_server: ServerProcess) -> None:
    run = digest(gpu_server, reference_gemm(), GEMM_M70)
    opcodes = run.executed_opcodes or {}
    assert opcodes.get("HGMMA", 0) > 0 and opcodes.get("UTMALDG", 0) > 0, opcodes
    assert run.summary is not None and run.summary.sol_compute_pct is not None, run.report[-3000:]
    assert run.summary.achieved_occupancy_pct is not None and run.summary.top_stalls, run.summary


def test_ncu_evidence_names_no_architecture_opcode_for_a_simt_kernel(gpu_server: ServerProcess) -> None:
    run = digest(gpu_server, cuda_add("simt"), VECTOR_ADD_SMALL)
    opcodes = run.executed_opcodes or {}
    assert sum(opcodes.values()) > 0, run.report[-3000:]
    assert not [op for op in opcodes if op in ("HGMMA", "UTMALDG", "UTMASTG") or op.startswith("UTC")], (
        opcodes
    )


def test_memcheck_finding_quotes_the_out_of_bounds_line(gpu_server: ServerProcess) -> None:
    with FIBServeClient(gpu_server.url, timeout=60) as client:
        answer = client.wait(
            client.submit_sanitize(cuda_add("oob", overrun=64), [VECTOR_ADD_SMALL]), timeout=900
        )
    assert answer.status == "completed", answer.error
    (run,) = answer.sanitizer or []
    assert run.verdict == "errors" and run.findings, run.output[-3000:]
    first = run.findings[0]
    assert first.message.startswith("Invalid __global__ write"), first
    (where,) = first.locations
    assert (where.file, where.line) == ("kernel.cu", OOB_LINE + 1)  # +1: the #define line cuda_add prepends
    assert where.source == "if (i < n + OVERRUN) z[i] = x[i % n] + y[i % n];"
