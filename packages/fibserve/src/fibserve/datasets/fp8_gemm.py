"""FP8 GEMMs with block scales (op type ``fp8_gemm``): ``C = (A * A_scale) @ (B * B_scale)^T`` in bf16.

The DeepSeek-V3 convention (DeepSeek-V3 technical report, section 3.3 "FP8 training"; DeepGEMM's
``fp8_gemm_nt``): e4m3 operands, one fp32 scale per 1x128 block of the activations ``A`` [M, K] (per token
and 128 channels: ``A_scale`` [M, ceil(K/128)]) and one per 128x128 block of the weight ``B`` [N, K]
(``B_scale`` [ceil(N/128), ceil(K/128)]); the real value of ``A[m, k]`` is ``A[m, k] * A_scale[m, k // 128]``
and of ``B[n, k]`` is ``B[n, k] * B_scale[n // 128, k // 128]``. NT layout: both operands K-major (row-major
``[M, K]`` and ``[N, K]``), ``C = A @ B^T`` [M, N] bf16. The scales are given logically row-major; a kernel
that wants DeepGEMM's column-major, TMA-aligned activation scales transposes them itself.

Shapes (N, K): the GEMMs of DeepSeek-V3 that DeepGEMM benchmarks (its README's dense-GEMM table: MLA
projections and the dense MLP), with M in {64, 128, 4096} as there. PTXBench's problem lists give these
GEMMs no workload uuids, so the uuids are PTXBench's own (uuid5 of the name and axes).

The reference dequantizes exactly in fp32 (e4m3 times an fp32 scale is exact in fp32) and multiplies in fp32
(no TF32), in blocks of :data:`ROWS` rows of A and of B, so it holds at most two fp32 blocks of
``ROWS * K`` values (and their expanded scales) besides the output.
"""

from __future__ import annotations

from fibserve.trace import AxisConst, AxisVar, Definition, TensorSpec

SHAPES = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))
"""(N, K) of DeepSeek-V3's GEMMs in DeepGEMM's benchmark table."""
M_VALUES = (64, 128, 4096)
"""Token counts of the workloads (DeepGEMM's table's)."""
BLOCK = 128
ROWS = 2048

REFERENCE = f'''import torch

BLOCK = {BLOCK}
ROWS = {ROWS}


def dequantize(x, scale, row_block):
    """x [r, K] e4m3 and scale [ceil(r / row_block), ceil(K / 128)] fp32 -> x * scale in fp32 [r, K]."""
    rows, k = x.shape
    wide = scale.float().repeat_interleave(row_block, dim=0)[:rows].repeat_interleave(BLOCK, dim=1)[:, :k]
    return x.float().mul_(wide)


def run(A, A_scale, B, B_scale):
    """C = (A * A_scale) @ (B * B_scale)^T in bf16: A [M, K] and B [N, K] e4m3, A_scale [M, K/128] (1x128
    blocks), B_scale [N/128, K/128] (128x128 blocks), fp32 products and sums."""
    m, n = A.shape[0], B.shape[0]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=A.device)
    for n0 in range(0, n, ROWS):
        n1 = min(n, n0 + ROWS)
        b = dequantize(B[n0:n1], B_scale[n0 // BLOCK : -(-n1 // BLOCK)], BLOCK)
        for m0 in range(0, m, ROWS):
            m1 = min(m, m0 + ROWS)
            a = dequantize(A[m0:m1], A_scale[m0:m1], 1)
            c[m0:m1, n0:n1] = torch.matmul(a, b.t()).to(torch.bfloat16)
    return c
'''


def _t(shape: list[str], dtype: str, description: str) -> TensorSpec:
    return TensorSpec(shape=shape, dtype=dtype, description=description)  # type: ignore[arg-type]


def fp8_gemm_definition(n: int, k: int) -> Definition:
    """``fp8_gemm_n{N}_k{K}``: var M, const N and K, 1x128 / 128x128 block scales."""
    return Definition(
        name=f"fp8_gemm_n{n}_k{k}",
        op_type="fp8_gemm",
        description=(
            f"FP8 GEMM with block scales, C = (A * A_scale) @ (B * B_scale)^T, N={n}, K={k}, variable M: A [M, K] "
            "and B [N, K] float8_e4m3fn, both K-major (NT); one fp32 scale per 1x128 block of A (A_scale [M, "
            "ceil(K/128)], per token and 128 channels) and per 128x128 block of B (B_scale [ceil(N/128), "
            "ceil(K/128)]): the DeepSeek-V3 convention (DeepGEMM fp8_gemm_nt). The real value of A[m, k] is "
            "A[m, k] * A_scale[m, k // 128], of B[n, k] is B[n, k] * B_scale[n // 128, k // 128]; C [M, N] "
            "bfloat16. A kernel applies the scales per 128-wide K block (promoting the FP8 tensor-core sums to "
            f"fp32 there). Shape of a DeepSeek-V3 GEMM from DeepGEMM's benchmark table (M in {list(M_VALUES)}); "
            "workload uuids are PTXBench's own."
        ),
        tags=["suite:ptxbench-fp8-gemm", "layout:nt", "scales:1x128-128x128", "model:deepseek-v3"],
        axes={
            "M": AxisVar(description="Rows of A and C (tokens)."),
            "N": AxisConst(value=n, description="Rows of B, columns of C (output features)."),
            "K": AxisConst(value=k, description="Reduction dimension (input features)."),
            "num_n_blocks": AxisConst(value=-(-n // BLOCK), description="ceil(N / 128)."),
            "num_k_blocks": AxisConst(value=-(-k // BLOCK), description="ceil(K / 128)."),
        },
        inputs={
            "A": _t(["M", "K"], "float8_e4m3fn", "Activations, e4m3, row-major (K contiguous)."),
            "A_scale": _t(["M", "num_k_blocks"], "float32", "Dequantization scale per 1x128 block of A."),
            "B": _t(["N", "K"], "float8_e4m3fn", "Weight, e4m3, row-major [N, K] (K contiguous)."),
            "B_scale": _t(
                ["num_n_blocks", "num_k_blocks"], "float32", "Dequantization scale per 128x128 block of B."
            ),
        },
        outputs={"C": _t(["M", "N"], "bfloat16", "(A * A_scale) @ (B * B_scale)^T.")},
        reference=REFERENCE,
    )


def fp8_gemm_definitions() -> list[tuple[Definition, list[int]]]:
    """Every FP8 GEMM definition with its workloads' M values."""
    return [(fp8_gemm_definition(n, k), list(M_VALUES)) for n, k in SHAPES]
