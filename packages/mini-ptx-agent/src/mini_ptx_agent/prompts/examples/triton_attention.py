# Pattern: attention forward in Triton, for mha_with_lse_d* (non-causal): q, k, v [B, H, S, D] bf16 ->
# o [B, H, S, D] bf16 and lse [B, H, S] fp32 (natural log of the sum of exp(q k^T / sqrt(D))). D a power of two.
# One program per (128 queries, batch * head). The operands are viewed as [B*H, S, D] and read through 3-D tensor
# descriptors (TMA on Hopper/Blackwell): a block never crosses into the next head, rows past S read as zeros and
# stores past S are dropped. Online softmax in base 2 (log2(e) folded into the scale); masked keys get -inf.
import math

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _attention_kernel(
    q_desc, k_desc, v_desc, o_desc, lse_ptr, seq_len, scale_log2,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    q = q_desc.load([bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    row_max = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    row_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        k = k_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = v_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        s = tl.dot(q, k.T) * scale_log2
        keys = start_n + tl.arange(0, BLOCK_N)
        s = tl.where(keys[None, :] < seq_len, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, 1))
        alpha = tl.math.exp2(row_max - new_max)
        p = tl.math.exp2(s - new_max[:, None])
        row_sum = row_sum * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        row_max = new_max
    o_desc.store([bh, start_m, 0], (acc / row_sum[:, None]).to(o_desc.dtype).reshape(1, BLOCK_M, HEAD_DIM))
    rows = start_m + tl.arange(0, BLOCK_M)
    lse = (row_max + tl.math.log2(row_sum)) * 0.6931471805599453
    tl.store(lse_ptr + bh * seq_len + rows, lse, mask=rows < seq_len)


def run(q, k, v, o, lse):
    """Inputs then outputs in definition order; o and lse are preallocated (destination passing)."""
    batch, heads, seq_len, head_dim = q.shape
    block_m, block_n = 128, 64

    def desc(t, rows):  # a view, not a copy: [B, H, S, D] -> [B*H, S, D]
        return TensorDescriptor.from_tensor(t.view(batch * heads, seq_len, head_dim), [1, rows, head_dim])

    grid = (triton.cdiv(seq_len, block_m), batch * heads)
    _attention_kernel[grid](
        desc(q, block_m), desc(k, block_n), desc(v, block_n), desc(o, block_m), lse, seq_len,
        1.4426950408889634 / math.sqrt(head_dim),
        HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8, num_stages=2,
    )  # fmt: skip
