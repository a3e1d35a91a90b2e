"""Demo turn 2 (Triton): a better-tiled ``tl.dot`` GEMM for gemm_n7168_k5120.

``C[M, N] = A[M, K] @ B[N, K]^T`` (bf16 in and out, fp32 accumulation). Larger 128 x 128 x 64 tiles,
a 1-D grid in grouped order (8 M-tiles walk the N-tiles together so that they share B in L2),
software pipelining (``num_stages=4``) and 8 warps. Loads past M, N, K read zero and the store is
masked: any M >= 0, any N and K.
"""

import triton
import triton.language as tl


@triton.jit
def _gemm_grouped(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid = tl.program_id(0)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rn[:, None] * stride_bn + rk[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(rn[:, None] < N) & (rk[None, :] < K - k0), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


def run(A, B, C):
    """``C = A @ B.T`` in place: A ``[M, K]``, B ``[N, K]``, C ``[M, N]``, row-major (last stride 1)."""
    m, k = A.shape
    n = B.shape[0]
    if m == 0 or n == 0:
        return
    bm, bn, bk = 128, 128, 64
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _gemm_grouped[grid](A, B, C, m, n, k, A.stride(0), B.stride(0), C.stride(0),
                        BM=bm, BN=bn, BK=bk, GROUP_M=8, num_stages=4, num_warps=8)  # fmt: skip
