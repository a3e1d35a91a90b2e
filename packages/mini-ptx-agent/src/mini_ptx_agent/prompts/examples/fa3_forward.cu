// Pattern: FlashAttention-3-style forward, basic schedule (sm_90a). For mha_with_lse_d128; the tiles, producer,
// softmax and epilogue are in fa3_forward_common.cuh. Each consumer warpgroup runs, per key block:
// S = Q K^T (wgmma, wait) -> online softmax -> O += P V (wgmma with P from registers, wait) -> release the stage.
// The tensor cores idle during each softmax; fa3_forward_pingpong.cu fills that gap.
#include "fa3_forward_common.cuh"

namespace {

__device__ void consume(fa3::Smem& s, int wg, int n_blocks, int seq_len, float (&o)[64], fa3::Softmax& softmax) {
  const uint32_t q = ptx::smem_addr(s.q) + wg * 64 * 128;  // this warpgroup's 64 rows in both halves of Q
  float scores[64];
  uint32_t p[8][4];
  ptx::mbar_wait_parity(&s.q_full, 0);
  ptx::RingPosition<fa3::kStages> pos;
  for (int j = 0; j < n_blocks; ++j, pos.advance()) {
    ptx::mbar_wait_parity(&s.k_full[pos.stage], pos.phase);
    fa3::issue_qk(scores, q, ptx::smem_addr(s.k[pos.stage]));
    ptx::wgmma_wait_group<0>();
    ptx::fence_operands(scores);
    float new_max[2];
    softmax.block_max(scores, j * fa3::kBlockN, seq_len, new_max);
    softmax.update(scores, o, new_max);
    ptx::accumulator_to_a_fragments<fa3::kBlockN>(scores, p);
    ptx::mbar_wait_parity(&s.v_full[pos.stage], pos.phase);
    fa3::issue_pv(o, p, ptx::smem_addr(s.v[pos.stage]));
    ptx::wgmma_wait_group<0>();
    ptx::fence_operands(o);
    if (threadIdx.x % 32 == 0) ptx::mbar_arrive(&s.kv_empty[pos.stage]);
  }
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView o,
         tvm::ffi::TensorView lse) {
  fa3::launch_forward<consume>(q, k, v, o, lse);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
