// Calls every helper of blackwell_tcgen05.cuh so that ptxas instantiates and checks each inline-PTX block.
// Compiled (never run) by tests/mini_ptx_agent/prompts/test_prompt_nvcc.py for sm_100a.
#include <cuda_bf16.h>

#include "blackwell_tcgen05.cuh"

__global__ void __launch_bounds__(128, 1) tcgen05_smoke(float* out) {
  __shared__ alignas(1024) __nv_bfloat16 tile_a[128 * 64];
  __shared__ alignas(1024) __nv_bfloat16 tile_b[128 * 64];
  __shared__ alignas(8) uint64_t mma_done;
  __shared__ uint32_t tmem_slot;

  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    bw::tmem_alloc(&tmem_slot, 128);
    bw::tmem_relinquish_alloc_permit();
  }
  if (threadIdx.x == 32) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bw::smem_addr(&mma_done)));
  }
  bw::fence_before_thread_sync();
  __syncthreads();
  bw::fence_after_thread_sync();
  const uint32_t tmem = tmem_slot;

  if (threadIdx.x == 0) {
    constexpr uint32_t idesc = bw::make_idesc_bf16_f32(128, 128);
    const uint64_t a = bw::make_smem_desc(tile_a, 16, 1024, bw::kSwizzle128B);
    const uint64_t b = bw::make_smem_desc(tile_b, 16, 1024, bw::kSwizzle128B);
    bw::mma_bf16_ss(tmem, a, b, idesc, 0);
    bw::mma_bf16_ss(tmem, a + 2, b + 2, idesc, 1);
    bw::mma_commit(&mma_done);
  }
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bw::smem_addr(&mma_done)));
  }
  bw::fence_after_thread_sync();
  uint32_t r[8];
  bw::tmem_ld_32x32b_x8(tmem + ((warp * 32u) << 16), r);
  bw::tmem_wait_ld();
  float sum = 0.0f;
  for (int i = 0; i < 8; ++i) sum += __uint_as_float(r[i]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  bw::fence_before_thread_sync();
  __syncthreads();
  if (warp == 0) bw::tmem_dealloc(tmem, 128);
}
