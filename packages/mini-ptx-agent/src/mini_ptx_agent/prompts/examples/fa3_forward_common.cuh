// Shared by fa3_forward.cu and fa3_forward_pingpong.cu: a FlashAttention-3-style forward for the definition
// mha_with_lse_d128 (non-causal): q, k, v [B, H, S, 128] bf16 -> o [B, H, S, 128] bf16 and lse [B, H, S] fp32,
// lse = natural-log logsumexp of the scores q k^T / sqrt(128).
//
// CTA = 128 query rows of one (batch, head), 384 threads: warpgroup 0 is the TMA producer, warpgroups 1 and 2 each
// own 64 query rows. Q is loaded once; K and V blocks of 128 keys stream through a 2-stage ring with separate
// barriers for K and V (S = Q K^T can start before V arrives). Per block: S by wgmma from shared memory, online
// softmax in registers (base 2, log2(e) folded into the scale), P converted in registers into the A operand of
// O += P V (wgmma with A from registers; V is MN-major for that product, so trans-b = 1). The epilogue writes O
// into the Q buffer with stmatrix and stores it with TMA; rows past S are clipped by TMA, masked in the softmax.
#pragma once
#include <cuda_bf16.h>
#include <tvm/ffi/function.h>

#include "attention_loads.cuh"
#include "host_checks.cuh"
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"
#include "ptx_wgmma.cuh"

namespace fa3 {

using attn::kBlockM;
using attn::kBlockN;
using attn::kHalfBytes;
using attn::kHeadDim;
constexpr int kStages = 2, kThreads = 384;
using Smem = attn::QkvTiles<kStages>;  // Q becomes the output tile in the epilogue

// S = Q K^T for the warpgroup's 64 rows (q = its rows of the Q tile): 8 k16 steps over head_dim. Issued, committed.
__device__ __forceinline__ void issue_qk(float (&s)[64], uint32_t q, uint32_t k) {
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const uint32_t offset = (kk / 4) * kHalfBytes + (kk % 4) * 32;
    ptx::wgmma_m64n128k16_ss<0, 0>(s, ptx::desc_k_major_sw128(q + offset), ptx::desc_k_major_sw128(k + offset),
                                   kk > 0);
  }
  ptx::wgmma_commit_group();
}

// O += P V over the 128 keys of a block. V [keys x head_dim] is MN-major here: its two head_dim halves are
// kHalfBytes apart (leading byte offset), 16 keys are 2048 bytes. Issued, committed.
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[8][4], uint32_t v) {
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    ptx::wgmma_m64n128k16_rs<1>(o, p[kk], ptx::desc_mn_major_sw128(v + kk * 2048, kHalfBytes), 1);
  }
  ptx::wgmma_commit_group();
}

// Online softmax state of this thread's two rows (r and r + 8 of the accumulator layout), in log2 units.
struct Softmax {
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share; the quad's shares are added up at the end

  // Scales and masks the block's scores (columns kv0..kv0+127) and returns the new running max of each row.
  __device__ __forceinline__ void block_max(float (&s)[64], int kv0, int seq_len, float (&new_max)[2]) const {
    const int c = 2 * (threadIdx.x % 4);
    float m[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // i / 2 = row half, i % 2 = column of the pair
        const bool valid = kv0 + 8 * j + c + i % 2 < seq_len;
        s[4 * j + i] = valid ? s[4 * j + i] * attn::kScaleLog2 : -INFINITY;
        m[i / 2] = fmaxf(m[i / 2], s[4 * j + i]);
      }
    }
    new_max[0] = ptx::quad_max(m[0]);
    new_max[1] = ptx::quad_max(m[1]);
  }
  // Rescales O by how much the running max grew, then turns the scores into probabilities in place.
  __device__ __forceinline__ void update(float (&s)[64], float (&o)[64], const float (&new_max)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float alpha = ptx::exp2_approx(row_max[h] - new_max[h]);  // 0 on the first block (-inf - finite)
      row_max[h] = new_max[h];
      row_sum[h] *= alpha;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        o[4 * j + 2 * h] *= alpha;
        o[4 * j + 2 * h + 1] *= alpha;
      }
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      s[i] = ptx::exp2_approx(s[i] - row_max[(i % 4) / 2]);
      row_sum[(i % 4) / 2] += s[i];
    }
  }
};

// O / rowsum into the Q buffer (stmatrix, swizzled like the output map), TMA store, and the natural-log LSE.
__device__ void store_output(Smem& s, int wg, float (&o)[64], const Softmax& softmax, const CUtensorMap* map_o,
                             float* lse, int bh, int q0, int seq_len) {
  const int row = q0 + 64 * wg + 16 * ((threadIdx.x % 128) / 32) + (threadIdx.x % 32) / 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = ptx::quad_sum(softmax.row_sum[h]);
    const float inv = 1.0f / sum;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[4 * j + 2 * h] *= inv;
      o[4 * j + 2 * h + 1] *= inv;
    }
    if (threadIdx.x % 4 == 0 && row + 8 * h < seq_len) {
      lse[static_cast<int64_t>(bh) * seq_len + row + 8 * h] = (softmax.row_max[h] + log2f(sum)) * 0.69314718056f;
    }
  }
  // This warpgroup's last wgmma that read its Q rows has completed, so the rows can hold O now.
  ptx::store_accumulator_smem_sw128<kHeadDim>(o, ptx::smem_addr(s.q) + wg * 64 * 128, kHalfBytes, 1.0f);
  ptx::fence_proxy_async_smem();
  ptx::named_barrier_sync(1 + wg, 128);
  if (threadIdx.x % 128 == 0) {
    ptx::tma_store_3d(map_o, s.q + wg * 64 * 128, 0, q0 + 64 * wg, bh);
    ptx::tma_store_3d(map_o, s.q + kHalfBytes + wg * 64 * 128, 64, q0 + 64 * wg, bh);
    ptx::tma_store_commit();
    ptx::tma_store_wait_read<0>();
  }
}

// The kernel of both variants; Consume is the variant's main loop of a consumer warpgroup.
using Consumer = void (*)(Smem& s, int wg, int n_blocks, int seq_len, float (&o)[64], Softmax& softmax);
template <Consumer Consume>
__global__ void __launch_bounds__(kThreads, 1)
    forward_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                   const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_o, float* lse,
                   int seq_len) {
  Smem& s = ptx::dynamic_smem_1024<Smem>();
  const int wg = ptx::warpgroup_index(), q0 = blockIdx.x * kBlockM, bh = blockIdx.y;
  const int n_blocks = (seq_len + kBlockN - 1) / kBlockN;
  if (threadIdx.x == 0) {
    s.init_barriers(8);  // each of the 8 consumer warps releases every K/V stage after its own wgmma wait
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (wg == 0) {
    ptx::setmaxnreg_dec<40>();  // 128 x 40 + 256 x 232 = 64512 <= 65536 registers
    if (threadIdx.x < 32 && ptx::elect_one_sync()) s.produce(&map_q, &map_k, &map_v, bh, q0, n_blocks);
    return;
  }
  ptx::setmaxnreg_inc<232>();
  float o[64] = {};
  Softmax softmax;
  Consume(s, wg - 1, n_blocks, seq_len, o, softmax);
  store_output(s, wg - 1, o, softmax, &map_o, lse, bh, q0, seq_len);
}

// Host side of both variants: checks, tensor maps over [B*H, S, 128], launch on the caller's stream.
template <Consumer Consume>
void launch_forward(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView o,
                    tvm::ffi::TensorView lse) {
  host::check_attention_forward(q, k, v, o, lse, kHeadDim);
  const int64_t bh = q.size(0) * q.size(1), seq_len = q.size(2);
  if (bh == 0 || seq_len == 0) return;
  const int smem_bytes = sizeof(Smem) + 1024;
  cudaFuncSetAttribute(forward_kernel<Consume>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const dim3 grid((seq_len + kBlockM - 1) / kBlockM, bh);
  // q, k, v are loaded in 128-row boxes; o is stored in 64-row boxes, one per consumer warpgroup.
  forward_kernel<Consume><<<grid, kThreads, smem_bytes, host::stream_of(q)>>>(
      host::bhsd_map(q, 128), host::bhsd_map(k, 128), host::bhsd_map(v, 128), host::bhsd_map(o, 64),
      static_cast<float*>(lse.data_ptr()), static_cast<int>(seq_len));
  host::check_launch("attention");
}

}  // namespace fa3
