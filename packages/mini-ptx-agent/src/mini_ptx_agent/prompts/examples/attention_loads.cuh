// The TMA producer shared by the attention forwards (fa3_forward_common.cuh on sm_90a, fa4_forward.cu on sm_100a):
// a 128-row Q tile loaded once and a ring of K and V blocks of 128 keys, head_dim 128, each tile stored as two
// 128B-swizzled [128 x 64] boxes. K and V have their own full barriers so S = Q K^T can start before V lands.
#pragma once
#include <cstdint>

#include "ptx_mbarrier.cuh"
#include "ptx_tma.cuh"

namespace attn {

constexpr int kHeadDim = 128, kBlockM = 128, kBlockN = 128;
constexpr int kHalfBytes = 128 * 64 * 2;    // [128 rows x 64 columns] bf16: one TMA box
constexpr int kTileBytes = 2 * kHalfBytes;  // both halves of head_dim
constexpr float kScaleLog2 = 0.088388347648318447f * 1.4426950408889634f;  // log2(e) / sqrt(128): softmax in base 2

template <int kStages>
struct alignas(1024) QkvTiles {
  uint8_t q[kTileBytes];
  uint8_t k[kStages][kTileBytes];
  uint8_t v[kStages][kTileBytes];
  uint64_t q_full, k_full[kStages], v_full[kStages], kv_empty[kStages];

  // One thread. `consumers` = arrivals that release a K/V stage (one per consumer warp, or one tcgen05.commit).
  __device__ __forceinline__ void init_barriers(uint32_t consumers) {
    ptx::mbar_init(&q_full, 1);
    for (int i = 0; i < kStages; ++i) {
      ptx::mbar_init(&k_full[i], 1);
      ptx::mbar_init(&v_full[i], 1);
      ptx::mbar_init(&kv_empty[i], consumers);
    }
  }

  // One elected thread: Q once, then K and V of every key block (two boxes each).
  __device__ void produce(const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v, int bh, int q0,
                          int n_blocks) {
    ptx::mbar_arrive_expect_tx(&q_full, kTileBytes);
    ptx::tma_load_3d(q, map_q, &q_full, 0, q0, bh);
    ptx::tma_load_3d(q + kHalfBytes, map_q, &q_full, 64, q0, bh);
    ptx::RingPosition<kStages> pos;
    for (int j = 0; j < n_blocks; ++j, pos.advance()) {
      const int st = pos.stage;
      ptx::mbar_wait_parity(&kv_empty[st], pos.phase ^ 1);
      ptx::mbar_arrive_expect_tx(&k_full[st], kTileBytes);
      ptx::tma_load_3d(k[st], map_k, &k_full[st], 0, j * kBlockN, bh);
      ptx::tma_load_3d(k[st] + kHalfBytes, map_k, &k_full[st], 64, j * kBlockN, bh);
      ptx::mbar_arrive_expect_tx(&v_full[st], kTileBytes);
      ptx::tma_load_3d(v[st], map_v, &v_full[st], 0, j * kBlockN, bh);
      ptx::tma_load_3d(v[st] + kHalfBytes, map_v, &v_full[st], 64, j * kBlockN, bh);
    }
  }
};

}  // namespace attn
