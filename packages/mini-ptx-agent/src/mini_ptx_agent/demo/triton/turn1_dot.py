"""Demo turn 1 (Triton): a simple, correct ``tl.dot`` GEMM for gemm_n7168_k5120.

``C[M, N] = A[M, K] @ B[N, K]^T`` (bf16 in and out, fp32 accumulation). One program per 64 x 64 tile of
C on a 2-D grid, 32-wide k steps with masked pointer loads (zero past M, N, K) and a masked store: any
M >= 0, any N and K. No tuning: the correctness baseline the later turns improve on.
"""

import triton
import triton.language as tl


@triton.jit
def _gemm_simple(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + ks[None, :],
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + rn[:, None] * stride_bn + ks[None, :],
                    mask=(rn[:, None] < N) & (ks[None, :] < K), other=0.0)  # fmt: skip
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


def run(A, B, C):
    """``C = A @ B.T`` in place: A ``[M, K]``, B ``[N, K]``, C ``[M, N]``, row-major (last stride 1)."""
    m, k = A.shape
    n = B.shape[0]
    if m == 0 or n == 0:
        return
    bm, bn, bk = 64, 64, 32
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    _gemm_simple[grid](A, B, C, m, n, k, A.stride(0), B.stride(0), C.stride(0), BM=bm, BN=bn, BK=bk)
