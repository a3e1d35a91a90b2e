// Pattern: cluster launch with TMA multicast (sm_90a).
// C[M, N] = A[M, K] @ B[N, K]^T in bf16 (the FlashInfer gemm definitions); M any, N a multiple of 128, K of 8.
// Clusters of 2 CTAs along M compute two 64 x 128 tiles of C that need the same 128 x 64 slices of B. Each CTA
// loads its own A slice and HALF of the B slice, multicast into both CTAs, so B crosses L2 once per cluster.
// Consequences that the code shows:
//   * each CTA's full barrier expects its A bytes plus the WHOLE B slice (half from itself, half from the peer);
//   * a stage may be refilled only when the consumers of BOTH CTAs are done with it, because the peer writes into
//     it too: empty barriers count one arrival per consumer warp of each CTA (2 x 4), and each warp arrives on
//     its own and on the peer's barrier (a remote mbarrier arrive into distributed shared memory);
//   * barriers are initialised before the peer may signal them (cluster barrier after init), and no CTA exits
//     while its peer may still write into it (cluster barrier at the end).
#include <cuda_bf16.h>
#include <tvm/ffi/function.h>

#include "host_checks.cuh"
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"
#include "ptx_wgmma.cuh"

namespace {

constexpr int kBM = 64, kBN = 128, kBK = 64, kStages = 4, kThreads = 256, kCluster = 2, kConsumerWarps = 4;
constexpr int kABytes = kBM * kBK * 2, kBBytes = kBN * kBK * 2, kBHalfBytes = kBBytes / kCluster;

struct alignas(1024) Smem {
  uint8_t a[kStages][kABytes];
  uint8_t b[kStages][kBBytes];
  uint64_t full[kStages], empty[kStages];
};

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, 1)
    gemm_multicast_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                          __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  // The same offset in every CTA: multicast writes (and signals) the same addresses in the peer.
  Smem& s = ptx::dynamic_smem_1024<Smem>();
  const uint32_t rank = ptx::cluster_ctarank(), peer = rank ^ 1;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN, k_blocks = (k + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      ptx::mbar_init(&s.full[i], 1);
      ptx::mbar_init(&s.empty[i], kCluster * kConsumerWarps);  // every consumer warp of the cluster
    }
    ptx::fence_barrier_init();
  }
  ptx::cluster_sync();  // the peer's barriers exist before anyone multicasts into them

  float acc[64];
  ptx::RingPosition<kStages> pos;
  if (ptx::warpgroup_index() == 0) {
    if (threadIdx.x < 32 && ptx::elect_one_sync()) {
      for (int kb = 0; kb < k_blocks; ++kb, pos.advance()) {
        ptx::mbar_wait_parity(&s.empty[pos.stage], pos.phase ^ 1);
        ptx::mbar_arrive_expect_tx(&s.full[pos.stage], kABytes + kBBytes);
        ptx::tma_load_2d(s.a[pos.stage], &map_a, &s.full[pos.stage], kb * kBK, m0);
        ptx::tma_load_2d_multicast(s.b[pos.stage] + rank * kBHalfBytes, &map_b, &s.full[pos.stage], kb * kBK,
                                   n0 + rank * (kBN / kCluster), static_cast<uint16_t>((1 << kCluster) - 1));
      }
    }
  } else {
    for (int kb = 0; kb < k_blocks; ++kb, pos.advance()) {
      ptx::mbar_wait_parity(&s.full[pos.stage], pos.phase);
      const uint32_t a = ptx::smem_addr(s.a[pos.stage]), b = ptx::smem_addr(s.b[pos.stage]);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        ptx::wgmma_m64n128k16_ss<0, 0>(acc, ptx::desc_k_major_sw128(a + 32 * kk),
                                       ptx::desc_k_major_sw128(b + 32 * kk), kb > 0 || kk > 0);
      }
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
      if (threadIdx.x % 32 == 0) {  // free the stage in both CTAs: the peer's producer writes here too
        ptx::mbar_arrive_cluster(&s.empty[pos.stage], rank);
        ptx::mbar_arrive_cluster(&s.empty[pos.stage], peer);
      }
    }
    ptx::fence_operands(acc);
    if (m0 < m) ptx::store_accumulator_bf16<kBN>(acc, c + static_cast<int64_t>(m0) * n + n0, n, m - m0, 1.0f);
  }
  ptx::cluster_sync();  // the peer may still arrive on our barriers until it is done
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const host::GemmShape shape = host::check_gemm(A, B, C);
  TVM_FFI_CHECK(shape.n % kBN == 0, ValueError) << "this example needs N % 128 == 0";
  if (shape.m == 0) return;
  const int smem_bytes = sizeof(Smem) + 1024;
  cudaFuncSetAttribute(gemm_multicast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const int m_tiles = static_cast<int>((shape.m + kBM - 1) / kBM);
  const dim3 grid((m_tiles + kCluster - 1) / kCluster * kCluster, shape.n / kBN);  // grid.x divisible by the cluster
  // B's box is half a slice: each CTA of the pair loads one half for both.
  gemm_multicast_kernel<<<grid, kThreads, smem_bytes, host::stream_of(A)>>>(
      host::matrix_map(A, kBM, kBK, CU_TENSOR_MAP_SWIZZLE_128B),
      host::matrix_map(B, kBN / kCluster, kBK, CU_TENSOR_MAP_SWIZZLE_128B), static_cast<__nv_bfloat16*>(C.data_ptr()),
      static_cast<int>(shape.m), static_cast<int>(shape.n), static_cast<int>(shape.k));
  host::check_launch("gemm");
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
