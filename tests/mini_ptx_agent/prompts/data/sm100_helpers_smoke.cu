// Calls the sm_100a helpers that no prompt example uses (CTA-pair tcgen05, clusters, multicast TMA, TMA stores of
// 3-D boxes, named barriers, quad reductions, setmaxnreg), so that ptxas checks their inline PTX too.
// Compiled (never run) by tests/mini_ptx_agent/prompts/test_prompt_example_builds.py as a second translation
// unit of the scaled_add build: device code only, so it costs no tvm-ffi host compile.
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"
#include "ptx_umma.cuh"

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 1)
    pair_smoke(const __grid_constant__ CUtensorMap map_2d, const __grid_constant__ CUtensorMap map_3d, float* out) {
  __shared__ alignas(1024) uint8_t tile[128 * 128];
  __shared__ alignas(8) uint64_t bar;
  __shared__ uint32_t tmem_slot;
  const uint32_t rank = ptx::cluster_ctarank();
  if (threadIdx.x == 0) {
    ptx::mbar_init(&bar, 1);
    ptx::fence_barrier_init();
  }
  if (threadIdx.x < 32) {
    ptx::tmem_alloc<2>(&tmem_slot, 128);
    ptx::tmem_relinquish_alloc_permit<2>();
  }
  ptx::fence_before_thread_sync();
  ptx::cluster_sync();
  ptx::fence_after_thread_sync();
  if (ptx::warpgroup_index() == 0) {
    ptx::setmaxnreg_dec<64>();
    if (threadIdx.x == 0) {
      ptx::mbar_arrive_expect_tx(&bar, sizeof(tile));
      ptx::tma_load_2d_multicast(tile, &map_2d, &bar, 0, 0, static_cast<uint16_t>(0x3));
    }
  } else {
    ptx::setmaxnreg_inc<192>();
  }
  ptx::mbar_wait_parity(&bar, 0);
  if (rank == 0 && threadIdx.x == 0) {
    const uint64_t desc = ptx::umma_desc_k_major_sw128(ptx::smem_addr(tile));
    ptx::umma_bf16_ss<2>(tmem_slot, desc, desc, ptx::umma_idesc_bf16(256, 128, false, false), 0);
    ptx::umma_commit_pair_multicast(&bar, 0x3);
  }
  ptx::named_barrier_sync(1, 256);
  ptx::named_barrier_arrive(2, 256);
  ptx::named_barrier_sync(2, 256);
  out[blockIdx.x * blockDim.x + threadIdx.x] = ptx::quad_max(1.0f) + ptx::quad_sum(2.0f);
  ptx::mbar_arrive_cluster(&bar, rank ^ 1);
  out[threadIdx.x] += __uint_as_float(ptx::ld_shared_cluster_u32(ptx::map_to_cta(ptx::smem_addr(tile), rank ^ 1)));
  ptx::fence_proxy_async_smem();
  if (threadIdx.x == 0) {
    ptx::tma_store_3d(&map_3d, tile, 0, 0, 0);
    ptx::tma_store_commit();
    ptx::tma_store_wait_read<0>();
  }
  ptx::fence_before_thread_sync();
  ptx::cluster_sync();
  if (threadIdx.x < 32) ptx::tmem_dealloc<2>(tmem_slot, 128);
}
