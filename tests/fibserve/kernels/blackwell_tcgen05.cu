// Analysis fixture for sm_100a: allocates tensor memory with tcgen05.alloc, issues one
// tcgen05.mma (kind::f16, bf16 inputs from shared memory descriptors, fp32 accumulator in tensor memory),
// commits it to an mbarrier, waits, reads the accumulator back with tcgen05.ld and frees the tensor memory.
// It only has to compile for sm_100a and keep UTC* opcodes in the SASS; the numerics are not the point.
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

__global__ void __launch_bounds__(128) tcgen05_kernel(float* __restrict__ out) {
  __shared__ alignas(1024) uint16_t tile_a[128 * 16];
  __shared__ alignas(1024) uint16_t tile_b[128 * 16];
  __shared__ alignas(8) uint64_t bar;
  __shared__ uint32_t tmem_base;

  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  const uint32_t slot = static_cast<uint32_t>(__cvta_generic_to_shared(&tmem_base));
  for (int i = threadIdx.x; i < 128 * 16; i += blockDim.x) tile_a[i] = tile_b[i] = 0x3f80;  // bf16 1.0
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 128;" ::"r"(slot));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t tmem = tmem_base;

  if (threadIdx.x == 0) {
    const uint64_t desc_a = ((static_cast<uint64_t>(__cvta_generic_to_shared(tile_a)) & 0x3FFFF) >> 4) |
                            (8ull << 16) | (16ull << 32) | (1ull << 46);
    const uint64_t desc_b = ((static_cast<uint64_t>(__cvta_generic_to_shared(tile_b)) & 0x3FFFF) >> 4) |
                            (8ull << 16) | (16ull << 32) | (1ull << 46);
    // Instruction descriptor: fp32 accumulate, bf16 A and B, K-major, N = 128, M = 128.
    const uint32_t idesc = (1u << 4) | (1u << 7) | (1u << 10) | ((128u >> 3) << 17) | ((128u >> 4) << 24);
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %4, 0;\n"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n"
        "}\n" ::"r"(tmem),
        "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(0));
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar_addr)
                 : "memory");
  }
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar_addr)
      : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");

  uint32_t v0, v1, v2, v3;
  const uint32_t lane_addr = tmem + ((threadIdx.x / 32 * 32) << 16);
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
               : "r"(lane_addr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  out[threadIdx.x * 4 + 0] = __uint_as_float(v0);
  out[threadIdx.x * 4 + 1] = __uint_as_float(v1);
  out[threadIdx.x * 4 + 2] = __uint_as_float(v2);
  out[threadIdx.x * 4 + 3] = __uint_as_float(v3);

  __syncthreads();
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" ::"r"(tmem));
  }
}

// out: [512] float32.
void run(tvm::ffi::TensorView out) {
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(out.device().device_type, out.device().device_id));
  tcgen05_kernel<<<1, 128, 0, stream>>>(static_cast<float*>(out.data_ptr()));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
