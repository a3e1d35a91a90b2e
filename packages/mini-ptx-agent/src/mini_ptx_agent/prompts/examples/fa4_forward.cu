// Pattern: FlashAttention-4-style forward on Blackwell (sm_100a), for mha_with_lse_d128 (non-causal):
// q, k, v [B, H, S, 128] bf16 -> o [B, H, S, 128] bf16, lse [B, H, S] fp32 (natural log).
// CTA = 128 query rows of one (batch, head), 256 threads in roles:
//   warp 0: TMA producer (Q once, K and V blocks of 128 keys into a 2-stage ring);
//   warp 1: allocates 256 tensor-memory columns (S in 0-127, O in 128-255); one elected thread issues every
//           tcgen05.mma: S = Q K^T, then O += P V, and commits each to an mbarrier;
//   warps 4-7 (a warpgroup, so warp w reaches TMEM lanes 32*(w%4)..): softmax. Thread t owns query row t =
//           TMEM lane t: it reads its whole score row with tcgen05.ld (no shuffles), writes P as bf16 into shared
//           memory (the A operand of the next MMA), rescales its O row in TMEM (tcgen05.ld/st) when the running max
//           grew, and at the end divides O by the row sum and stores O and the LSE.
// Handshakes: s_full (MMA -> softmax: S ready), p_full (softmax -> MMA: P written and S read, 128 arrivals),
// o_done (MMA -> softmax: P V finished, so O may be rescaled and P overwritten), kv_empty (MMA -> producer).
// This is the smallest correct schedule: S and softmax alternate. FA4 adds a second Q tile so that one tile's
// softmax overlaps the other's MMAs, keeps P in TMEM, and skips most O rescales.
#include <cuda_bf16.h>
#include <tvm/ffi/function.h>

#include "attention_loads.cuh"
#include "host_checks.cuh"
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"
#include "ptx_umma.cuh"

namespace {

using attn::kBlockM;
using attn::kBlockN;
using attn::kHalfBytes;
using attn::kHeadDim;
using attn::kTileBytes;
constexpr int kStages = 2, kThreads = 256;
constexpr uint32_t kTmemColumns = 256, kOColumn = 128;
// S = Q K^T: A = Q and B = K both K-major. O += P V: A = P K-major, B = V MN-major (head_dim contiguous).
constexpr uint32_t kIdescQK = ptx::umma_idesc_bf16(kBlockM, kBlockN, false, false);
constexpr uint32_t kIdescPV = ptx::umma_idesc_bf16(kBlockM, kHeadDim, false, true);

struct alignas(1024) Smem {
  attn::QkvTiles<kStages> tiles;  // Q, the K/V ring and its barriers
  uint8_t p[kTileBytes];          // probabilities of one block, 128B-swizzled like a TMA tile
  uint64_t s_full, p_full, o_done;
  uint32_t tmem_base;
};

// The single MMA thread. K-major k16 step kk of a [128 x 128] operand: half kk / 4, +32 bytes per step inside it.
__device__ void issue_mmas(Smem& s, int n_blocks) {
  const uint32_t tmem_s = s.tmem_base, tmem_o = s.tmem_base + kOColumn;
  const uint32_t q = ptx::smem_addr(s.tiles.q), p = ptx::smem_addr(s.p);
  ptx::mbar_wait_parity(&s.tiles.q_full, 0);
  ptx::RingPosition<kStages> pos;
  for (int j = 0; j < n_blocks; ++j, pos.advance()) {
    const uint32_t k = ptx::smem_addr(s.tiles.k[pos.stage]), v = ptx::smem_addr(s.tiles.v[pos.stage]);
    ptx::mbar_wait_parity(&s.tiles.k_full[pos.stage], pos.phase);
    ptx::fence_after_thread_sync();  // S may be overwritten: the softmax of block j - 1 read it (p_full below)
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t offset = (kk / 4) * kHalfBytes + (kk % 4) * 32;
      ptx::umma_bf16_ss(tmem_s, ptx::umma_desc_k_major_sw128(q + offset), ptx::umma_desc_k_major_sw128(k + offset),
                        kIdescQK, kk > 0);
    }
    ptx::umma_commit(&s.s_full);
    ptx::mbar_wait_parity(&s.p_full, j & 1);
    ptx::mbar_wait_parity(&s.tiles.v_full[pos.stage], pos.phase);
    ptx::fence_after_thread_sync();
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t p_offset = (kk / 4) * kHalfBytes + (kk % 4) * 32;
      ptx::umma_bf16_ss(tmem_o, ptx::umma_desc_k_major_sw128(p + p_offset),
                        ptx::umma_desc_mn_major_sw128(v + kk * 2048, kHalfBytes), kIdescPV, j > 0 || kk > 0);
    }
    ptx::umma_commit(&s.o_done);
    ptx::umma_commit(&s.tiles.kv_empty[pos.stage]);  // the stage is free once these MMAs have read it
  }
}

// 16 TMEM columns of this thread's row, as floats.
__device__ __forceinline__ void load_row(uint32_t taddr, float (&x)[16]) {
  uint32_t r[16];
  ptx::tmem_ld_32x32b_x16(taddr, r);
  ptx::tmem_wait_ld();
  ptx::fence_operands(r);
#pragma unroll
  for (int i = 0; i < 16; ++i) x[i] = __uint_as_float(r[i]);
}

// Writes this thread's probabilities (row t) into the P tile at `p_tile` (a shared address): 16-byte chunk c of
// a 128-byte row goes to chunk c ^ (t % 8), the 128B swizzle that the K-major descriptor expects.
__device__ __forceinline__ void store_p_row(uint32_t p_tile, int t, const float (&prob)[kBlockN]) {
#pragma unroll
  for (int c = 0; c < kBlockN / 8; ++c) {
    const float* x = prob + 8 * c;
    ptx::st_shared_v4(p_tile + (c / 8) * kHalfBytes + t * 128 + ((c % 8) ^ (t % 8)) * 16, ptx::pack_bf16x2(x[0], x[1]),
                      ptx::pack_bf16x2(x[2], x[3]), ptx::pack_bf16x2(x[4], x[5]), ptx::pack_bf16x2(x[6], x[7]));
  }
}

__device__ void softmax_rows(Smem& s, int n_blocks, int seq_len, int64_t row_index, __nv_bfloat16* o_row, float* lse) {
  const int t = threadIdx.x - 128;                                   // query row = TMEM lane
  const uint32_t lane_bits = static_cast<uint32_t>(t / 32 * 32) << 16;  // this warp's lane quarter
  const uint32_t tmem_s = s.tmem_base + lane_bits, tmem_o = s.tmem_base + lane_bits + kOColumn;
  float row_max = -INFINITY, row_sum = 0.0f, prob[kBlockN];
  for (int j = 0; j < n_blocks; ++j) {
    ptx::mbar_wait_parity(&s.s_full, j & 1);
    ptx::fence_after_thread_sync();
    float block_max = row_max;
#pragma unroll
    for (int c = 0; c < kBlockN / 16; ++c) {
      float x[16];
      load_row(tmem_s + 16 * c, x);
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        prob[16 * c + i] = j * kBlockN + 16 * c + i < seq_len ? x[i] * attn::kScaleLog2 : -INFINITY;
        block_max = fmaxf(block_max, prob[16 * c + i]);
      }
    }
    const float alpha = ptx::exp2_approx(row_max - block_max);
    row_max = block_max;
    row_sum *= alpha;
#pragma unroll
    for (int i = 0; i < kBlockN; ++i) {
      prob[i] = ptx::exp2_approx(prob[i] - row_max);
      row_sum += prob[i];
    }
    if (j > 0) {  // P V of block j - 1 is done: O may be rescaled and the P tile rewritten
      ptx::mbar_wait_parity(&s.o_done, (j - 1) & 1);
      ptx::fence_after_thread_sync();
#pragma unroll
      for (int c = 0; c < kHeadDim / 16; ++c) {
        float x[16];
        uint32_t r[16];
        load_row(tmem_o + 16 * c, x);
#pragma unroll
        for (int i = 0; i < 16; ++i) r[i] = __float_as_uint(x[i] * alpha);
        ptx::tmem_st_32x32b_x16(tmem_o + 16 * c, r);
      }
      ptx::tmem_wait_st();
    }
    store_p_row(ptx::smem_addr(s.p), t, prob);
    ptx::fence_proxy_async_smem();  // P is written by the generic proxy and read by tcgen05.mma
    ptx::fence_before_thread_sync();
    ptx::mbar_arrive(&s.p_full);
  }
  ptx::mbar_wait_parity(&s.o_done, (n_blocks - 1) & 1);
  ptx::fence_after_thread_sync();
  const float inv = 1.0f / row_sum;
#pragma unroll
  for (int c = 0; c < kHeadDim / 16; ++c) {
    float x[16];
    load_row(tmem_o + 16 * c, x);  // every lane of the warp executes tcgen05.ld (.sync.aligned)
    uint4 out[2];
    uint32_t* packed = reinterpret_cast<uint32_t*>(out);
#pragma unroll
    for (int i = 0; i < 8; ++i) packed[i] = ptx::pack_bf16x2(x[2 * i] * inv, x[2 * i + 1] * inv);
    if (o_row != nullptr) {  // nullptr: a row past the end of the sequence
      reinterpret_cast<uint4*>(o_row + 16 * c)[0] = out[0];
      reinterpret_cast<uint4*>(o_row + 16 * c)[1] = out[1];
    }
  }
  if (o_row != nullptr) lse[row_index] = (row_max + log2f(row_sum)) * 0.69314718056f;
}

__global__ void __launch_bounds__(kThreads, 1)
    fa4_forward_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                       const __grid_constant__ CUtensorMap map_v, __nv_bfloat16* __restrict__ o, float* lse,
                       int seq_len) {
  Smem& s = ptx::dynamic_smem_1024<Smem>();
  const int warp = threadIdx.x / 32, q0 = blockIdx.x * kBlockM, bh = blockIdx.y;
  const int n_blocks = (seq_len + kBlockN - 1) / kBlockN;
  if (threadIdx.x == 0) {
    s.tiles.init_barriers(1);  // a K/V stage is released by one tcgen05.commit
    ptx::mbar_init(&s.s_full, 1);
    ptx::mbar_init(&s.p_full, 128);  // every softmax thread
    ptx::mbar_init(&s.o_done, 1);
    ptx::fence_barrier_init();
  }
  if (warp == 1) {
    ptx::tmem_alloc(&s.tmem_base, kTmemColumns);
    ptx::tmem_relinquish_alloc_permit();
  }
  ptx::fence_before_thread_sync();
  __syncthreads();
  ptx::fence_after_thread_sync();

  if (warp == 0) {
    if (ptx::elect_one_sync()) s.tiles.produce(&map_q, &map_k, &map_v, bh, q0, n_blocks);
  } else if (warp == 1) {
    if (ptx::elect_one_sync()) issue_mmas(s, n_blocks);
  } else if (warp >= 4) {
    const int64_t row = q0 + threadIdx.x - 128;
    const bool valid = row < seq_len;
    const int64_t row_index = static_cast<int64_t>(bh) * seq_len + row;
    softmax_rows(s, n_blocks, seq_len, row_index, valid ? o + row_index * kHeadDim : nullptr, lse);
  }
  ptx::fence_before_thread_sync();
  __syncthreads();  // every warp is done with tensor memory
  ptx::fence_after_thread_sync();
  if (warp == 1) ptx::tmem_dealloc(s.tmem_base, kTmemColumns);
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView o,
         tvm::ffi::TensorView lse) {
  host::check_attention_forward(q, k, v, o, lse, kHeadDim);
  const int64_t bh = q.size(0) * q.size(1), seq_len = q.size(2);
  if (bh == 0 || seq_len == 0) return;
  const int smem_bytes = sizeof(Smem) + 1024;
  cudaFuncSetAttribute(fa4_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const dim3 grid((seq_len + kBlockM - 1) / kBlockM, bh);
  fa4_forward_kernel<<<grid, kThreads, smem_bytes, host::stream_of(q)>>>(
      host::bhsd_map(q, 128), host::bhsd_map(k, 128), host::bhsd_map(v, 128),
      static_cast<__nv_bfloat16*>(o.data_ptr()), static_cast<float*>(lse.data_ptr()), static_cast<int>(seq_len));
  host::check_launch("attention");
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
