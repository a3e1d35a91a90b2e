// Analysis fixture: a plain SIMT tvm-ffi kernel (out = a + b) with no architecture-specific instructions.
// a, b, out: [n] float32.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView out) {
  int64_t n = a.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(a.data_ptr()), static_cast<const float*>(b.data_ptr()), static_cast<float*>(out.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
