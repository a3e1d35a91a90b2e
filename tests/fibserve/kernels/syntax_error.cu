// Build fixture: a missing semicolon and an undeclared identifier; the build must report COMPILE_ERROR with
// nvcc's own message naming this file and line.
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

__global__ void broken_kernel(float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x
  if (i < n) y[i] = undeclared_scale * y[i];
}

void run(tvm::ffi::TensorView y) {
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(y.device().device_type, y.device().device_id));
  broken_kernel<<<1, 256, 0, stream>>>(static_cast<float*>(y.data_ptr()), y.size(0));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
