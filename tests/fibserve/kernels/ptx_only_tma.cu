// Analysis fixture: a plain SIMT add (out = a + b) whose inline PTX holds a TMA load, an mbarrier.init and a
// setmaxnreg under a predicate that ptxas proves false: the PTX has the instructions, the SASS has none.
// a, b, out: [n] float32.
#include <cstdint>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n, const void* tensor_map) {
  __shared__ alignas(128) float tile[64];
  __shared__ alignas(8) uint64_t barrier;
  uint32_t tile_at = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  uint32_t barrier_at = static_cast<uint32_t>(__cvta_generic_to_shared(&barrier));
  asm volatile(
      "{\n .reg .pred never;\n setp.ne.u32 never, 0, 0;\n"
      " @never cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      " @never mbarrier.init.shared::cta.b64 [%4], 1;\n"
      " @never setmaxnreg.inc.sync.aligned.u32 240;\n}"
      :: "r"(tile_at), "l"(tensor_map), "r"(0), "r"(0), "r"(barrier_at) : "memory");
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView out) {
  int64_t n = a.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(a.data_ptr()),
      static_cast<const float*>(b.data_ptr()), static_cast<float*>(out.data_ptr()), n, nullptr);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
