"""torch.matmul as a Python solution for gemm_n7168_k5120 (value-returning, like the reference): speedup near 1."""

import torch


def run(A, B):
    return torch.matmul(A, B.T)
