"""GPU check of the prompts' CUDA examples: each runs on small shapes (ragged ones included) and matches a
reference. Forward attention is compared with the bundled mha_with_lse_d128 definition's reference, backward
with torch autograd in fp32, GEMMs with fp32 torch, the transpose exactly. Outputs start as NaN, so a kernel
that skips an element fails. sm_100a examples run only on a Blackwell GPU.

Run on the GPU machine: ``pytest -m gpu tests/mini_ptx_agent/prompts/test_prompt_examples_gpu.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from fibserve.build import load_tvm_ffi_entry
from fibserve.datasets import default_root
from mini_ptx_agent.prompts.registry import PROMPTS_DIR
from prompt_builds import build_kernel

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc, pytest.mark.slow, pytest.mark.timeout(900)]

if TYPE_CHECKING:
    import torch
else:
    torch = None  # imported by the `cuda` fixture, so collecting this module (CI deselects it) stays cheap


@pytest.fixture(autouse=True)
def cuda() -> None:
    """torch with a CUDA device, or skip."""
    global torch
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")


def entry(example: str, arch: str) -> Callable[..., Any]:
    """The built example's `run` on this GPU; skips where the GPU is not of `arch`."""
    major = torch.cuda.get_device_capability()[0]
    if (arch == "sm_90a" and major != 9) or (arch == "sm_100a" and major != 10):
        pytest.skip(f"{example} is built for {arch}; this GPU is sm_{major}x")
    return load_tvm_ffi_entry(build_kernel(PROMPTS_DIR / "examples" / example, arch))


def nan_like(t: Any, dtype: Any = None) -> Any:
    return torch.full_like(t, float("nan"), dtype=dtype)


def relative_error(x: Any, reference: Any) -> float:
    """max |x - ref| / max |ref| over fp32 copies (NaN if x has a NaN)."""
    return (
        (x.float() - reference.float()).abs().max() / reference.float().abs().max().clamp_min(1e-6)
    ).item()


@pytest.fixture(scope="module")
def mha_reference() -> Callable[..., Any]:
    definition = json.loads((default_root() / "definitions" / "mha" / "mha_with_lse_d128.json").read_text())
    namespace: dict[str, Any] = {}
    exec(definition["reference"], namespace)
    return namespace["run"]


@pytest.mark.parametrize(
    ("example", "arch"),
    [("fa3_forward.cu", "sm_90a"), ("fa3_forward_pingpong.cu", "sm_90a"), ("fa4_forward.cu", "sm_100a")],
)
@pytest.mark.parametrize("seq_len", [128, 200, 640])
def test_attention_forward_matches_the_definition_reference(
    example: str, arch: str, seq_len: int, mha_reference: Callable[..., Any]
) -> None:
    run = entry(example, arch)
    torch.manual_seed(seq_len)
    q, k, v = (torch.randn(2, 3, seq_len, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o, lse = nan_like(q), torch.full((2, 3, seq_len), float("nan"), device="cuda")
    run(q, k, v, o, lse)
    torch.cuda.synchronize()
    o_ref, lse_ref = mha_reference(q, k, v)
    assert torch.isfinite(o).all() and torch.isfinite(lse).all()
    assert (o.float() - o_ref.float()).abs().max().item() < 2e-2
    assert (lse - lse_ref).abs().max().item() < 1e-3


def attention_backward_reference(q: Any, k: Any, v: Any, dout: Any) -> tuple[Any, ...]:
    """o (bf16), lse (fp32) and fp32 dq, dk, dv by autograd, for the mha_bwd definitions' math."""
    qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
    scores = qf @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
    lse = torch.logsumexp(scores, dim=-1)
    o = torch.exp(scores - lse[..., None]) @ vf
    o.backward(dout.float())
    return o.detach().to(torch.bfloat16), lse.detach(), qf.grad, kf.grad, vf.grad


@pytest.mark.parametrize("example", ["fa3_backward_atomic_dq.cu", "fa3_backward_dq_kernel.cu"])
@pytest.mark.parametrize("seq_len", [64, 320])
def test_attention_backward_matches_autograd(example: str, seq_len: int) -> None:
    run = entry(example, "sm_90a")
    torch.manual_seed(seq_len)
    q, k, v, dout = (torch.randn(2, 3, seq_len, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o, lse, dq_ref, dk_ref, dv_ref = attention_backward_reference(q, k, v, dout)
    dq, dk, dv = nan_like(q), nan_like(k), nan_like(v)
    run(q, k, v, o, lse, dout, dq, dk, dv)
    torch.cuda.synchronize()
    for name, got, want in (("dq", dq, dq_ref), ("dk", dk, dk_ref), ("dv", dv, dv_ref)):
        assert relative_error(got, want) < 2e-2, name


@pytest.mark.parametrize("example", ["gemm_warp_specialized.cu", "gemm_cluster_multicast.cu"])
@pytest.mark.parametrize(("m", "n", "k"), [(64, 128, 64), (200, 256, 328), (1000, 384, 512)])
def test_gemm_matches_torch(example: str, m: int, n: int, k: int) -> None:
    run = entry(example, "sm_90a")
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    run(a, b, c)
    torch.cuda.synchronize()
    assert relative_error(c, a.float() @ b.float().T) < 1e-2


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_tma_transpose_is_exact(arch: str) -> None:
    run = entry("tma_store_transpose.cu", arch)
    x = torch.randn(200, 136, device="cuda", dtype=torch.bfloat16)
    y = torch.full((136, 200), float("nan"), device="cuda", dtype=torch.bfloat16)
    run(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x.T)
