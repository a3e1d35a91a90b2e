// Calls every helper of hopper_ptx.cuh so that ptxas instantiates and checks each inline-PTX block.
// Compiled (never run) by tests/mini_ptx_agent/prompts/test_prompt_nvcc.py for sm_90a.
#include <cuda_bf16.h>

#include "hopper_ptx.cuh"

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
    helpers_smoke(const __grid_constant__ CUtensorMap map_in, const __grid_constant__ CUtensorMap map_out,
                  float* out) {
  __shared__ alignas(1024) __nv_bfloat16 tile_a[64 * 64];
  __shared__ alignas(1024) __nv_bfloat16 tile_b[64 * 64];
  __shared__ alignas(8) uint64_t full_bar;
  __shared__ alignas(8) uint64_t empty_bar;

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    hp::tma_prefetch_descriptor(&map_in);
    hp::mbar_init(&full_bar, 1);
    hp::mbar_init(&empty_bar, 2);
    hp::fence_barrier_init();
  }
  hp::cluster_sync();

  if (warpgroup == 0) {  // producer
    hp::setmaxnreg_dec<40>();
    if (threadIdx.x < 32 && hp::elect_one_sync()) {
      hp::mbar_wait_parity(&empty_bar, 1);
      hp::mbar_arrive_expect_tx(&full_bar, 2 * 64 * 64 * sizeof(__nv_bfloat16));
      hp::tma_load_2d(tile_a, &map_in, &full_bar, 0, blockIdx.x * 64);
      hp::tma_load_2d_multicast(tile_b, &map_in, &full_bar, 64, 0, static_cast<uint16_t>(0x3));
    }
  } else {  // consumers
    hp::setmaxnreg_inc<232>();
    float acc[32];
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    hp::mbar_wait_parity(&full_bar, 0);
    if (hp::mbar_try_wait_parity(&empty_bar, 0)) acc[0] = 1.0f;
    const uint64_t desc_a = hp::make_smem_desc(tile_a, 16, 1024, hp::kSwizzle128B);
    const uint64_t desc_b = hp::make_smem_desc(tile_b, 16, 1024, hp::kSwizzle128B);
    for (int i = 0; i < 32; ++i) hp::fence_accumulator(acc[i]);
    hp::wgmma_fence();
    hp::wgmma_m64n64k16_f32_bf16(acc, desc_a, desc_b, 0);
    hp::wgmma_m64n64k16_f32_bf16(acc, desc_a + 2, desc_b + 2, 1);
    hp::wgmma_commit_group();
    hp::wgmma_wait_group<0>();
    for (int i = 0; i < 32; ++i) hp::fence_accumulator(acc[i]);
    if (threadIdx.x % 128 == 0) hp::mbar_arrive(&empty_bar);
    if (threadIdx.x % 128 == 1) hp::mbar_arrive_cluster(&empty_bar, hp::cluster_ctarank() ^ 1);

    const int lane = threadIdx.x % 32;
    uint32_t* staging = reinterpret_cast<uint32_t*>(tile_a);
    hp::stmatrix_x4(staging + lane * 4, hp::pack_bf16x2(acc[0], acc[1]), hp::pack_bf16x2(acc[2], acc[3]),
                    hp::pack_bf16x2(acc[4], acc[5]), hp::pack_bf16x2(acc[6], acc[7]));
    hp::fence_proxy_async_smem();
    if (threadIdx.x == 128) {
      hp::tma_store_2d(&map_out, tile_a, 0, blockIdx.x * 64);
      hp::tma_store_commit();
      hp::tma_store_wait_read<0>();
    }
    float sum = 0.0f;
    for (int i = 0; i < 32; ++i) sum += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  }
  hp::cluster_sync();
}

// Host helper instantiation: encodes a map (never called in CI, only compiled and linked into the object).
extern "C" int smoke_make_map(CUtensorMap* map, const void* ptr) {
  return static_cast<int>(hp::make_tensor_map_2d(map, ptr, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4096, 4096,
                                                 4096 * 2, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B));
}
