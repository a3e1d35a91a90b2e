"""Triton reference kernel for ``gemm_n7168_k5120``: ``C[M, N] = A[M, K] @ B[N, K]^T`` in bf16.

Entry point ``run(A, B, C)`` (FlashInfer Trace Triton ABI, destination passing): ``A`` bf16
``[M, 5120]``, ``B`` bf16 ``[7168, 5120]`` (N x K, K-contiguous), ``C`` bf16 ``[M, 7168]``
preallocated; returns nothing. No torch compute ops: operands move through host-side TMA tensor
descriptors (``triton.tools.tensor_descriptor.TensorDescriptor``), which zero-fill loads past M
and clip stores at M. Configurations are fixed for the H200 (132 SMs): a persistent grid with
grouped tile order, 128 x 256 x 64 tiles, 3 stages and 8 warps for large M; 128 x 128 tiles for
small M so that more SMs get work.
"""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

H200_NUM_SMS = 132


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M M-tiles walk all N-tiles, M fastest, for L2 reuse."""
    per_group = GROUP_M * num_pid_n
    group = tile_id // per_group
    first_m = group * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    in_group = tile_id % per_group
    pid_m = first_m + in_group % group_m
    pid_n = in_group // group_m
    return pid_m, pid_n


@triton.jit
def _gemm_tn_persistent(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
):
    """Persistent TMA GEMM: each program walks tiles start, start + NUM_PROGRAMS, ..."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([pid_n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


@triton.jit
def _gemm_tn_tiled(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """One program per output tile (no persistence), grouped order."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, ki * BK])
        b = b_desc.load([pid_n * BN, ki * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


def _config(m: int, n: int) -> tuple[int, int, int, int, int]:
    """Fixed H200 choice (BM, BN, BK, num_stages, num_warps) by M.

    Small M (fewer 128 x 256 tiles than SMs) uses 128-wide N tiles to put more SMs to work.
    """
    if triton.cdiv(m, 128) * triton.cdiv(n, 256) < H200_NUM_SMS:
        return 128, 128, 64, 4, 8
    return 128, 256, 64, 3, 8


def run(A, B, C, variant: str = "persistent") -> None:
    """Compute ``C = A @ B.T`` in place.

    Args:
        A: bf16 CUDA tensor ``[M, K]``, row-major (K % 8 == 0 for 16-byte TMA strides).
        B: bf16 CUDA tensor ``[N, K]``, row-major.
        C: bf16 CUDA tensor ``[M, N]``, row-major, written entirely (rows < M only exist).
        variant: ``"persistent"`` (default) or ``"tiled"``; both compute the same function.

    Raises:
        ValueError: on mismatched shapes or an unknown variant.
    """
    m, k = A.shape
    n = B.shape[0]
    if B.shape[1] != k or tuple(C.shape) != (m, n):
        raise ValueError(
            f"shapes A{tuple(A.shape)} B{tuple(B.shape)} C{tuple(C.shape)} do not fit C = A @ B.T"
        )
    if m == 0:
        return
    bm, bn, bk, stages, warps = _config(m, n)
    a_desc = TensorDescriptor.from_tensor(A, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(B, [bn, bk])
    c_desc = TensorDescriptor.from_tensor(C, [bm, bn])
    num_tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    if variant == "persistent":
        programs = min(H200_NUM_SMS, num_tiles)
        _gemm_tn_persistent[(programs,)](
            a_desc, b_desc, c_desc, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=16, NUM_PROGRAMS=programs,
            num_stages=stages, num_warps=warps,
        )  # fmt: skip
    elif variant == "tiled":
        _gemm_tn_tiled[(num_tiles,)](
            a_desc, b_desc, c_desc, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=16,
            num_stages=stages, num_warps=warps,
        )  # fmt: skip
    else:
        raise ValueError(f"unknown variant {variant!r}; use 'persistent' or 'tiled'")
