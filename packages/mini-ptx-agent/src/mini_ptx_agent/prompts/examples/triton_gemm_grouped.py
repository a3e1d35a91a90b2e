# Pattern: L2-friendly tile order (grouped ordering, "L2 swizzle") in Triton, with block pointers.
# C[M, N] = A[M, K] @ B[N, K]^T (the FlashInfer gemm definitions); any M, N, K.
# Programs are numbered along M inside groups of GROUP_M tile rows: the programs that run at the same time cover a
# GROUP_M x (few) block of C, so they share rows of A and columns of B in L2 instead of each streaming its own.
import triton
import triton.language as tl


@triton.jit
def _grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n  # programs per group: GROUP_M tile rows x all tile columns
    first_m = (pid // in_group) * GROUP_M
    group_rows = min(num_m - first_m, GROUP_M)  # the last group may be shorter
    pid_m = first_m + (pid % in_group) % group_rows
    pid_n = (pid % in_group) // group_rows

    # Block pointers describe the tiles; boundary_check + zero padding handle ragged edges.
    a_block = tl.make_block_ptr(a_ptr, (M, K), (K, 1), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (N, K), (K, 1), (pid_n * BLOCK_N, 0), (BLOCK_N, BLOCK_K), (1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b.T, acc)  # wgmma on sm_90a, tcgen05 on sm_100a
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (0, BLOCK_K))
    c_block = tl.make_block_ptr(
        c_ptr, (M, N), (N, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0)
    )
    tl.store(c_block, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


def run(A, B, C):
    """Inputs then outputs in definition order; C is preallocated (destination passing)."""
    M, K = A.shape
    N = B.shape[0]
    block_m, block_n, block_k = 128, 128, 64
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    _grouped_gemm_kernel[grid](
        A, B, C, M, N, K,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8, num_warps=8, num_stages=3,
    )  # fmt: skip
