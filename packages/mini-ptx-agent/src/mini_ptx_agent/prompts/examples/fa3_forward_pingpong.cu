// Pattern: FlashAttention-3-style forward with ping-pong scheduling and softmax/GEMM overlap (sm_90a). For
// mha_with_lse_d128; tiles, producer, softmax and epilogue are in fa3_forward_common.cuh.
//   * Ping-pong: the two consumer warpgroups take turns issuing wgmmas, handed over with named barriers
//     (bar.sync to wait for the turn, bar.arrive to pass it). The tensor cores run one warpgroup's GEMMs while
//     the other warpgroup computes its softmax.
//   * Overlap inside a warpgroup: in each turn it issues S_j = Q K_j^T and then O += P_{j-1} V_{j-1}; it waits
//     for S_j only (wgmma.wait_group 1), computes the row max while the P V product still runs, then waits for it
//     before rescaling O and overwriting P (registers an in-flight wgmma reads must not change).
// Turn accounting: each warpgroup waits n + 1 times (n key blocks plus the last P V); warpgroup 1 passes first
// (so warpgroup 0 starts) and skips its last pass, so every bar.sync meets exactly one bar.arrive.
#include "fa3_forward_common.cuh"

namespace {

__device__ __forceinline__ void wait_turn(int wg) { ptx::named_barrier_sync(3 + wg, 256); }
__device__ __forceinline__ void pass_turn(int wg) { ptx::named_barrier_arrive(3 + (1 - wg), 256); }

__device__ void consume(fa3::Smem& s, int wg, int n_blocks, int seq_len, float (&o)[64], fa3::Softmax& softmax) {
  const uint32_t q = ptx::smem_addr(s.q) + wg * 64 * 128;
  float scores[64], new_max[2];
  uint32_t p[8][4];
  ptx::mbar_wait_parity(&s.q_full, 0);
  if (wg == 1) pass_turn(wg);  // warpgroup 0 issues first
  ptx::RingPosition<fa3::kStages> pos, previous;

  wait_turn(wg);  // block 0: S only
  ptx::mbar_wait_parity(&s.k_full[pos.stage], pos.phase);
  fa3::issue_qk(scores, q, ptx::smem_addr(s.k[pos.stage]));
  pass_turn(wg);
  ptx::wgmma_wait_group<0>();
  ptx::fence_operands(scores);
  softmax.block_max(scores, 0, seq_len, new_max);
  softmax.update(scores, o, new_max);
  ptx::accumulator_to_a_fragments<fa3::kBlockN>(scores, p);
  previous = pos;
  pos.advance();

  for (int j = 1; j < n_blocks; ++j) {
    wait_turn(wg);
    ptx::mbar_wait_parity(&s.k_full[pos.stage], pos.phase);
    fa3::issue_qk(scores, q, ptx::smem_addr(s.k[pos.stage]));  // older group: S_j
    ptx::mbar_wait_parity(&s.v_full[previous.stage], previous.phase);
    fa3::issue_pv(o, p, ptx::smem_addr(s.v[previous.stage]));  // newer group: O += P_{j-1} V_{j-1}
    pass_turn(wg);
    ptx::wgmma_wait_group<1>();  // S_j is complete; P V may still run
    ptx::fence_operands(scores);
    softmax.block_max(scores, j * fa3::kBlockN, seq_len, new_max);
    ptx::wgmma_wait_group<0>();  // now O and the P registers are free again
    ptx::fence_operands(o);
    if (threadIdx.x % 32 == 0) ptx::mbar_arrive(&s.kv_empty[previous.stage]);
    softmax.update(scores, o, new_max);
    ptx::accumulator_to_a_fragments<fa3::kBlockN>(scores, p);
    previous = pos;
    pos.advance();
  }

  wait_turn(wg);  // the last P V
  ptx::mbar_wait_parity(&s.v_full[previous.stage], previous.phase);
  fa3::issue_pv(o, p, ptx::smem_addr(s.v[previous.stage]));
  if (wg == 0) pass_turn(wg);
  ptx::wgmma_wait_group<0>();
  ptx::fence_operands(o);
  if (threadIdx.x % 32 == 0) ptx::mbar_arrive(&s.kv_empty[previous.stage]);
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView o,
         tvm::ffi::TensorView lse) {
  fa3::launch_forward<consume>(q, k, v, o, lse);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
