// Shared by fa3_backward_atomic_dq.cu and fa3_backward_dq_kernel.cu: a FlashAttention-3-style backward for the
// definition mha_bwd_d64 (non-causal): inputs q, k, v, o [B, H, S, 64] bf16, lse [B, H, S] fp32 (natural log),
// do [B, H, S, 64] bf16; outputs dq, dk, dv [B, H, S, 64] bf16. S must be a multiple of 64 (every seq_len of the
// suite is). With scale = 1/8 and P = exp(scale * q k^T - lse):
//   delta = rowsum(do * o),  dV = P^T dO,  dS = P * (dO V^T - delta),  dK = scale * dS^T Q,  dQ = scale * dS K.
//
// Kernel 1 (preprocess) computes delta. Kernel 2 (kv_block_kernel) gives each CTA 64 keys of one (batch, head):
// K and V stay in shared memory while the Q and dO blocks of all queries stream through a 2-stage TMA ring; one
// consumer warpgroup computes S^T = K Q^T and dP^T = V dO^T (so rows are keys and the results feed the next
// products as register A operands), then dV += P^T dO and dK += dS^T Q. Q and dO are K-major for the first two
// products and MN-major (trans-b = 1) for the last two: the same shared-memory tile, read two ways. What remains is
// dQ, which needs a sum over all key blocks: the two variants differ there.
#pragma once
#include <cuda_bf16.h>
#include <tvm/ffi/function.h>

#include "host_checks.cuh"
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"
#include "ptx_wgmma.cuh"

namespace fa3bwd {

constexpr int kHeadDim = 64, kBlock = 64, kStages = 2, kThreads = 256;  // producer + one consumer warpgroup
constexpr int kTileBytes = kBlock * kHeadDim * 2;  // one [64 x 64] bf16 box: 128B-swizzled rows
constexpr float kScale = 0.125f, kLog2e = 1.4426950408889634f;

// delta[row] = sum_d do[row, d] * o[row, d] in fp32; one warp per row of [B*H*S, 64].
__global__ void preprocess_kernel(const __nv_bfloat16* __restrict__ o, const __nv_bfloat16* __restrict__ dout,
                                  float* __restrict__ delta, int64_t rows) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float2 a = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(o + row * kHeadDim)[lane]);
  const float2 b = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(dout + row * kHeadDim)[lane]);
  float sum = a.x * b.x + a.y * b.y;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
  if (lane == 0) delta[row] = sum;
}

// Shared memory of both block kernels: two tiles loaded once (K, V for a key block; Q, dO for a query block), a
// ring of the two tiles streamed past them, and the dS^T tile of the atomic variant.
struct alignas(1024) Smem {
  uint8_t fixed[2][kTileBytes];
  uint8_t streamed[kStages][2][kTileBytes];
  uint8_t ds[kTileBytes];
  uint64_t fixed_full, full[kStages], empty[kStages];

  __device__ __forceinline__ void init_barriers() {  // one thread; each consumer warp releases every stage
    ptx::mbar_init(&fixed_full, 1);
    for (int i = 0; i < kStages; ++i) {
      ptx::mbar_init(&full[i], 1);
      ptx::mbar_init(&empty[i], 4);
    }
    ptx::fence_barrier_init();
  }
  // One elected thread: the fixed tiles at row `row0`, then the streamed tiles of every block of 64 rows.
  __device__ void produce(const CUtensorMap* fixed0, const CUtensorMap* fixed1, const CUtensorMap* streamed0,
                          const CUtensorMap* streamed1, int bh, int row0, int n_blocks) {
    ptx::mbar_arrive_expect_tx(&fixed_full, 2 * kTileBytes);
    ptx::tma_load_3d(fixed[0], fixed0, &fixed_full, 0, row0, bh);
    ptx::tma_load_3d(fixed[1], fixed1, &fixed_full, 0, row0, bh);
    ptx::RingPosition<kStages> pos;
    for (int i = 0; i < n_blocks; ++i, pos.advance()) {
      ptx::mbar_wait_parity(&empty[pos.stage], pos.phase ^ 1);
      ptx::mbar_arrive_expect_tx(&full[pos.stage], 2 * kTileBytes);
      ptx::tma_load_3d(streamed[pos.stage][0], streamed0, &full[pos.stage], 0, i * kBlock, bh);
      ptx::tma_load_3d(streamed[pos.stage][1], streamed1, &full[pos.stage], 0, i * kBlock, bh);
    }
  }
};

struct Maps {
  CUtensorMap q, k, v, dout;  // [B*H, S, 64] bf16, 64-row boxes, 128B swizzle
};

// D = A B^T over head_dim for two K-major [64 x 64] tiles: 4 k16 steps (not committed).
__device__ __forceinline__ void issue_nt(float (&d)[32], uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    ptx::wgmma_m64n64k16_ss<0, 0>(d, ptx::desc_k_major_sw128(a + 32 * kk), ptx::desc_k_major_sw128(b + 32 * kk), kk > 0);
  }
}
// D += A B with A from registers (4 k16 fragments) and B an MN-major [64 x 64] tile (not committed).
__device__ __forceinline__ void issue_rs(float (&d)[32], const uint32_t (&a)[4][4], uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < kBlock / 16; ++kk) {
    ptx::wgmma_m64n64k16_rs<1>(d, a[kk], ptx::desc_mn_major_sw128(b + 2048 * kk, kTileBytes), 1);
  }
}

// Per query block: P^T and dS^T (in place of S^T and dP^T) from the scores of 64 keys x 64 queries; the columns
// of the accumulators are queries q0.. q0+63, whose lse and delta this thread reads.
__device__ __forceinline__ void probabilities_and_ds(float (&st)[32], float (&dpt)[32], const float* lse,
                                                     const float* delta, int64_t row0) {
  const int c = 2 * (threadIdx.x % 4);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float lse_log2 = lse[row0 + 8 * j + c + e] * kLog2e, d = delta[row0 + 8 * j + c + e];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 4 * j + 2 * h + e;
        st[i] = ptx::exp2_approx(st[i] * (kScale * kLog2e) - lse_log2);
        dpt[i] = st[i] * (dpt[i] - d);
      }
    }
  }
}

// dK and dV of 64 keys; with kAtomicDq also each query block's dQ share dS K, added into dq_acc (fp32).
template <bool kAtomicDq>
__global__ void __launch_bounds__(kThreads, 1)
    kv_block_kernel(const __grid_constant__ Maps maps, const float* __restrict__ lse, const float* __restrict__ delta,
                    __nv_bfloat16* __restrict__ dk, __nv_bfloat16* __restrict__ dv, float* __restrict__ dq_acc,
                    int seq_len) {
  Smem& s = ptx::dynamic_smem_1024<Smem>();
  const int kv0 = blockIdx.x * kBlock, bh = blockIdx.y, n_blocks = seq_len / kBlock;
  const int64_t head = static_cast<int64_t>(bh) * seq_len;  // first row of this (batch, head)
  if (threadIdx.x == 0) s.init_barriers();
  __syncthreads();
  if (ptx::warpgroup_index() == 0) {
    if (threadIdx.x < 32 && ptx::elect_one_sync()) s.produce(&maps.k, &maps.v, &maps.q, &maps.dout, bh, kv0, n_blocks);
    return;
  }
  const uint32_t k = ptx::smem_addr(s.fixed[0]), v = ptx::smem_addr(s.fixed[1]);
  float dk_acc[32] = {}, dv_acc[32] = {}, st[32], dpt[32];
  uint32_t p_frag[4][4], ds_frag[4][4];
  ptx::mbar_wait_parity(&s.fixed_full, 0);
  ptx::RingPosition<kStages> pos;
  for (int i = 0; i < n_blocks; ++i, pos.advance()) {
    ptx::mbar_wait_parity(&s.full[pos.stage], pos.phase);
    const uint32_t q = ptx::smem_addr(s.streamed[pos.stage][0]), dout = ptx::smem_addr(s.streamed[pos.stage][1]);
    ptx::wgmma_fence();
    issue_nt(st, k, q);      // S^T = K Q^T
    issue_nt(dpt, v, dout);  // dP^T = V dO^T
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_operands(st);
    ptx::fence_operands(dpt);
    probabilities_and_ds(st, dpt, lse, delta, head + i * kBlock);
    ptx::accumulator_to_a_fragments<kBlock>(st, p_frag);
    ptx::accumulator_to_a_fragments<kBlock>(dpt, ds_frag);
    ptx::wgmma_fence();
    issue_rs(dv_acc, p_frag, dout);  // dV += P^T dO
    issue_rs(dk_acc, ds_frag, q);    // dK += dS^T Q (scaled at the end)
    ptx::wgmma_commit_group();
    float dq[32];
    if constexpr (kAtomicDq) {
      // dQ = dS K needs dS with queries as rows: dS^T goes through shared memory, where it is read MN-major.
      // Each warp writes key rows that every warp's dQ rows use, so all four must be past the previous dQ wgmma.
      ptx::named_barrier_sync(1, 128);
      ptx::store_accumulator_smem_sw128<kBlock>(dpt, ptx::smem_addr(s.ds), 0, 1.0f);
      ptx::fence_proxy_async_smem();
      ptx::named_barrier_sync(1, 128);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlock / 16; ++kk) {
        ptx::wgmma_m64n64k16_ss<1, 1>(dq, ptx::desc_mn_major_sw128(ptx::smem_addr(s.ds) + 2048 * kk, kTileBytes),
                                      ptx::desc_mn_major_sw128(k + 2048 * kk, kTileBytes), kk > 0);
      }
      ptx::wgmma_commit_group();
    }
    ptx::wgmma_wait_group<0>();
    ptx::fence_operands(dv_acc);
    ptx::fence_operands(dk_acc);
    if (threadIdx.x % 32 == 0) ptx::mbar_arrive(&s.empty[pos.stage]);
    if constexpr (kAtomicDq) {
      ptx::fence_operands(dq);
      const int lane = threadIdx.x % 32, row = 16 * ((threadIdx.x % 128) / 32) + lane / 4;
      float* tile = dq_acc + (head + i * kBlock) * kHeadDim;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          atomicAdd(tile + (row + 8 * h) * kHeadDim + 8 * j + 2 * (lane % 4), kScale * dq[4 * j + 2 * h]);
          atomicAdd(tile + (row + 8 * h) * kHeadDim + 8 * j + 2 * (lane % 4) + 1, kScale * dq[4 * j + 2 * h + 1]);
        }
      }
    }
  }
  ptx::store_accumulator_bf16<kHeadDim>(dk_acc, dk + (head + kv0) * kHeadDim, kHeadDim, kBlock, kScale);
  ptx::store_accumulator_bf16<kHeadDim>(dv_acc, dv + (head + kv0) * kHeadDim, kHeadDim, kBlock, 1.0f);
}

// What both variants need before their own kernels: checked shapes, tensor maps, and delta (scratch memory on
// the caller's stream, freed by the caller with cudaFreeAsync).
struct Prepared {
  Maps maps;
  float* delta = nullptr;
  int64_t bh = 0, seq_len = 0;
  cudaStream_t stream = nullptr;
};

inline Prepared prepare(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v,
                        tvm::ffi::TensorView o, tvm::ffi::TensorView lse, tvm::ffi::TensorView dout,
                        tvm::ffi::TensorView dq, tvm::ffi::TensorView dk, tvm::ffi::TensorView dv) {
  const tvm::ffi::TensorView* bf16[] = {&q, &k, &v, &o, &dout, &dq, &dk, &dv};
  const char* names[] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};
  for (int i = 0; i < 8; ++i) host::check_bhsd(*bf16[i], names[i], q, kHeadDim);
  host::check_lse(lse, q);
  TVM_FFI_CHECK(q.size(2) % kBlock == 0, ValueError) << "this kernel needs seq_len % 64 == 0";
  Prepared p;
  p.bh = q.size(0) * q.size(1);
  p.seq_len = q.size(2);
  const int64_t rows = p.bh * p.seq_len;
  if (rows == 0) return p;  // delta stays nullptr: nothing to compute
  p.stream = host::stream_of(q);
  p.maps = {host::bhsd_map(q, kBlock), host::bhsd_map(k, kBlock), host::bhsd_map(v, kBlock), host::bhsd_map(dout, kBlock)};
  TVM_FFI_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p.delta), rows * sizeof(float), p.stream) == cudaSuccess,
                RuntimeError)
      << "cannot allocate the delta scratch buffer";
  preprocess_kernel<<<(rows * 32 + 255) / 256, 256, 0, p.stream>>>(static_cast<const __nv_bfloat16*>(o.data_ptr()),
                                                                    static_cast<const __nv_bfloat16*>(dout.data_ptr()),
                                                                    p.delta, rows);
  return p;
}

// Launches kv_block_kernel<kAtomicDq> for every (key block, batch * head).
template <bool kAtomicDq>
void launch_kv_blocks(const Prepared& p, const float* lse, tvm::ffi::TensorView dk, tvm::ffi::TensorView dv,
                      float* dq_acc) {
  const int smem_bytes = sizeof(Smem) + 1024;
  cudaFuncSetAttribute(kv_block_kernel<kAtomicDq>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const dim3 grid(p.seq_len / kBlock, p.bh);
  kv_block_kernel<kAtomicDq><<<grid, kThreads, smem_bytes, p.stream>>>(
      p.maps, lse, p.delta, static_cast<__nv_bfloat16*>(dk.data_ptr()), static_cast<__nv_bfloat16*>(dv.data_ptr()),
      dq_acc, static_cast<int>(p.seq_len));
}

// Frees delta and raises if a launch failed.
inline void finish(const Prepared& p) {
  cudaFreeAsync(p.delta, p.stream);
  host::check_launch("attention backward");
}

}  // namespace fa3bwd
