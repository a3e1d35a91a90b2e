// Pattern: FlashAttention-3-style backward, dQ in its own kernel (sm_90a). For mha_bwd_d64; the preprocess
// kernel and the key-block kernel are in fa3_backward_common.cuh. Kernels: preprocess (delta) ->
// kv_block_kernel<false> (dK, dV) -> dq_kernel. The dQ kernel mirrors the forward: a CTA keeps 64 queries' Q and
// dO in shared memory, streams K and V, recomputes S and dP with queries as rows, so dS is already the register
// A operand of dQ += dS K (K is MN-major for this product). No atomics and no fp32 buffer, at the price of
// computing Q K^T and dO V^T twice.
#include "fa3_backward_common.cuh"

namespace {

using fa3bwd::kBlock;
using fa3bwd::kHeadDim;

__global__ void __launch_bounds__(fa3bwd::kThreads, 1)
    dq_kernel(const __grid_constant__ fa3bwd::Maps maps, const float* __restrict__ lse,
              const float* __restrict__ delta, __nv_bfloat16* __restrict__ dq, int seq_len) {
  fa3bwd::Smem& s = ptx::dynamic_smem_1024<fa3bwd::Smem>();  // fixed: Q, dO; streamed: K, V
  const int q0 = blockIdx.x * kBlock, bh = blockIdx.y, n_blocks = seq_len / kBlock;
  const int64_t head = static_cast<int64_t>(bh) * seq_len;
  if (threadIdx.x == 0) s.init_barriers();
  __syncthreads();
  if (ptx::warpgroup_index() == 0) {
    if (threadIdx.x < 32 && ptx::elect_one_sync()) s.produce(&maps.q, &maps.dout, &maps.k, &maps.v, bh, q0, n_blocks);
    return;
  }
  // This thread's two query rows (r, r + 8 of the accumulator layout): their lse (in log2 units) and delta.
  const int row = 16 * ((threadIdx.x % 128) / 32) + (threadIdx.x % 32) / 4;
  const float lse_log2[2] = {lse[head + q0 + row] * fa3bwd::kLog2e, lse[head + q0 + row + 8] * fa3bwd::kLog2e};
  const float row_delta[2] = {delta[head + q0 + row], delta[head + q0 + row + 8]};
  const uint32_t q = ptx::smem_addr(s.fixed[0]), dout = ptx::smem_addr(s.fixed[1]);
  float dq_acc[32] = {}, scores[32], dp[32];
  uint32_t ds_frag[4][4];
  ptx::mbar_wait_parity(&s.fixed_full, 0);
  ptx::RingPosition<fa3bwd::kStages> pos;
  for (int j = 0; j < n_blocks; ++j, pos.advance()) {
    ptx::mbar_wait_parity(&s.full[pos.stage], pos.phase);
    const uint32_t k = ptx::smem_addr(s.streamed[pos.stage][0]), v = ptx::smem_addr(s.streamed[pos.stage][1]);
    ptx::wgmma_fence();
    fa3bwd::issue_nt(scores, q, k);  // S = Q K^T
    fa3bwd::issue_nt(dp, dout, v);   // dP = dO V^T
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_operands(scores);
    ptx::fence_operands(dp);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int h = (i % 4) / 2;
      const float p = ptx::exp2_approx(scores[i] * (fa3bwd::kScale * fa3bwd::kLog2e) - lse_log2[h]);
      dp[i] = p * (dp[i] - row_delta[h]);  // dS
    }
    ptx::accumulator_to_a_fragments<kBlock>(dp, ds_frag);
    ptx::wgmma_fence();
    fa3bwd::issue_rs(dq_acc, ds_frag, k);  // dQ += dS K
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_operands(dq_acc);
    if (threadIdx.x % 32 == 0) ptx::mbar_arrive(&s.empty[pos.stage]);
  }
  ptx::store_accumulator_bf16<kHeadDim>(dq_acc, dq + (head + q0) * kHeadDim, kHeadDim, kBlock, fa3bwd::kScale);
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView o,
         tvm::ffi::TensorView lse, tvm::ffi::TensorView dout, tvm::ffi::TensorView dq, tvm::ffi::TensorView dk,
         tvm::ffi::TensorView dv) {
  const fa3bwd::Prepared p = fa3bwd::prepare(q, k, v, o, lse, dout, dq, dk, dv);
  if (p.delta == nullptr) return;
  const auto* lse_ptr = static_cast<const float*>(lse.data_ptr());
  fa3bwd::launch_kv_blocks<false>(p, lse_ptr, dk, dv, nullptr);
  const int smem_bytes = sizeof(fa3bwd::Smem) + 1024;
  cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const dim3 grid(p.seq_len / kBlock, p.bh);
  dq_kernel<<<grid, fa3bwd::kThreads, smem_bytes, p.stream>>>(p.maps, lse_ptr, p.delta,
                                                               static_cast<__nv_bfloat16*>(dq.data_ptr()),
                                                               static_cast<int>(p.seq_len));
  fa3bwd::finish(p);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
