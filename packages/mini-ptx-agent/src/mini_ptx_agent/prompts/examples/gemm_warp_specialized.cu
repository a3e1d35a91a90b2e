// Pattern: warp specialization with a producer/consumer mbarrier ring (sm_90a).
// C[M, N] = A[M, K] @ B[N, K]^T in bf16 with fp32 accumulation (the FlashInfer gemm definitions); M any, N and K
// multiples of 8 (16-byte TMA row pitch). One CTA per 128 x 128 tile of C, 384 threads:
//   warpgroup 0 = producer: gives registers away (setmaxnreg.dec), one elected thread issues the TMA loads of
//                 each 64-wide K slice of A and B into a 4-stage ring;
//   warpgroups 1, 2 = consumers: take registers (setmaxnreg.inc), each multiplies its 64 rows of A with B by
//                 wgmma and keeps one wgmma group in flight; the epilogue stores C with stmatrix + TMA.
// Ring: full[s] completes when the TMA bytes of stage s landed (count 1: the producer's arrive.expect_tx);
// empty[s] completes when all 8 consumer warps released stage s (count 8: each warp arrives after its own
// wgmma.wait_group, since a warp's wait says nothing about the other warps' reads of the stage).
#include <cuda_bf16.h>
#include <tvm/ffi/function.h>

#include "host_checks.cuh"
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"
#include "ptx_wgmma.cuh"

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 4, kThreads = 384;
constexpr int kOperandBytes = 128 * kBK * 2;  // one A or B stage: 128 rows x 64 bf16 (128B-swizzled rows)

struct alignas(1024) Smem {
  uint8_t a[kStages][kOperandBytes];
  uint8_t b[kStages][kOperandBytes];
  uint8_t c[2][kBM * 64 * 2];  // the C tile as two [128 x 64] column halves, 128B-swizzled for the TMA store
  uint64_t full[kStages], empty[kStages];
};

__device__ void produce(Smem& s, const CUtensorMap* map_a, const CUtensorMap* map_b, int m0, int n0, int k_blocks) {
  ptx::RingPosition<kStages> pos;
  for (int kb = 0; kb < k_blocks; ++kb, pos.advance()) {
    ptx::mbar_wait_parity(&s.empty[pos.stage], pos.phase ^ 1);  // the first round passes on fresh barriers
    ptx::mbar_arrive_expect_tx(&s.full[pos.stage], 2 * kOperandBytes);
    ptx::tma_load_2d(s.a[pos.stage], map_a, &s.full[pos.stage], kb * kBK, m0);
    ptx::tma_load_2d(s.b[pos.stage], map_b, &s.full[pos.stage], kb * kBK, n0);
  }
}

// Multiplies this warpgroup's 64 rows; keeps the newest wgmma group in flight and frees the stage before it.
__device__ void consume(Smem& s, int wg, int k_blocks, float (&acc)[64]) {
  ptx::RingPosition<kStages> pos, previous;
  for (int kb = 0; kb < k_blocks; ++kb) {
    ptx::mbar_wait_parity(&s.full[pos.stage], pos.phase);
    const uint32_t a = ptx::smem_addr(s.a[pos.stage]) + wg * 64 * 128, b = ptx::smem_addr(s.b[pos.stage]);
    ptx::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBK / 16; ++k) {
      ptx::wgmma_m64n128k16_ss<0, 0>(acc, ptx::desc_k_major_sw128(a + 32 * k), ptx::desc_k_major_sw128(b + 32 * k),
                                     kb > 0 || k > 0);
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<1>();  // the group of the previous k-block is done: its stage can be refilled
    if (kb > 0 && threadIdx.x % 32 == 0) ptx::mbar_arrive(&s.empty[previous.stage]);
    previous = pos;
    pos.advance();
  }
  ptx::wgmma_wait_group<0>();
  ptx::fence_operands(acc);
}

__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                const __grid_constant__ CUtensorMap map_c, int k) {
  Smem& s = ptx::dynamic_smem_1024<Smem>();
  const int wg = ptx::warpgroup_index(), m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN, k_blocks = (k + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      ptx::mbar_init(&s.full[i], 1);
      ptx::mbar_init(&s.empty[i], 8);  // one arrival per consumer warp
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    ptx::setmaxnreg_dec<40>();  // 128 x 40 + 256 x 232 = 64512 <= 65536 registers
    if (threadIdx.x < 32 && ptx::elect_one_sync()) produce(s, &map_a, &map_b, m0, n0, k_blocks);
    return;
  }
  ptx::setmaxnreg_inc<232>();
  const int cw = wg - 1;  // consumer 0 owns rows 0-63 of the tile, consumer 1 rows 64-127
  float acc[64];
  consume(s, cw, k_blocks, acc);
  const uint32_t c = ptx::smem_addr(s.c) + cw * 64 * 128;  // this warpgroup's rows in both column halves
  ptx::store_accumulator_smem_sw128<kBN>(acc, c, sizeof(s.c[0]), 1.0f);
  ptx::fence_proxy_async_smem();
  ptx::named_barrier_sync(1 + cw, 128);  // the four warps of this warpgroup wrote their rows
  if (threadIdx.x % 128 == 0) {
    ptx::tma_store_2d(&map_c, s.c[0] + cw * 64 * 128, n0, m0 + 64 * cw);  // rows past M are clipped
    ptx::tma_store_2d(&map_c, s.c[1] + cw * 64 * 128, n0 + 64, m0 + 64 * cw);
    ptx::tma_store_commit();
    ptx::tma_store_wait_read<0>();
  }
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const host::GemmShape shape = host::check_gemm(A, B, C);
  if (shape.m == 0) return;
  const int smem_bytes = sizeof(Smem) + 1024;  // + room to align the ring to 1024 bytes (128B swizzle atoms)
  cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  const dim3 grid((shape.n + kBN - 1) / kBN, (shape.m + kBM - 1) / kBM);
  // Loads: 128 rows x 64 columns (128 bytes) in 128B swizzle, what the wgmma descriptors read. Stores: 64 x 64.
  gemm_kernel<<<grid, kThreads, smem_bytes, host::stream_of(A)>>>(
      host::matrix_map(A, 128, kBK, CU_TENSOR_MAP_SWIZZLE_128B), host::matrix_map(B, 128, kBK, CU_TENSOR_MAP_SWIZZLE_128B),
      host::matrix_map(C, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B), static_cast<int>(shape.k));
  host::check_launch("gemm");
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
