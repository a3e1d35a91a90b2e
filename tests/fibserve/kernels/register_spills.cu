// Analysis fixture: __launch_bounds__(1024, 2) caps the kernel at 32 registers per thread while 64 values
// stay live across a loop, so ptxas must spill to local memory; the analysis reports the spill bytes.
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

__global__ void __launch_bounds__(1024, 2) spilling_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                            int64_t n, int rounds) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) v[j] = x[(i + j * 997) % n];
  for (int r = 0; r < rounds; ++r) {
#pragma unroll
    for (int j = 0; j < 64; ++j) v[j] = v[j] * v[(j + 1) % 64] + v[(j + 7) % 64];
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 64; ++j) sum += v[j];
  y[i] = sum;
}

// x, y: [n] float32.
void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  const int64_t n = x.size(0);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  spilling_kernel<<<static_cast<unsigned>((n + 1023) / 1024), 1024, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()), n, 4);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
