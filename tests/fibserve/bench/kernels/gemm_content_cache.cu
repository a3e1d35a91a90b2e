// Caches its output keyed by the *content* of a few input values (the first 8 of A and of B, read back to the
// host): computes once per content key, then replays the copy. A: [M, K] bf16, B: [N, K] bf16, C: [M, N]
// bf16. Where a harness repeats input content during timing, this kernel answers from its cache and looks as
// fast as a copy; FIBServe gives every timed call fresh content, so it never hits and is timed as the naive
// GEMM it is (scripts/gpu_suite.py, content_cache_never_hits).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstring>
#include <map>
#include <string>

__global__ void gemm_naive(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t M,
                           int64_t N, int64_t K) {
  int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t row = blockIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < K; ++k) acc += __bfloat162float(A[row * K + k]) * __bfloat162float(B[col * K + k]);
  C[row * N + col] = __float2bfloat16(acc);
}

static std::map<std::string, void*> cache;

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  if (B.size(1) != K || C.size(0) != M || C.size(1) != N) TVM_FFI_THROW(ValueError) << "shape mismatch";
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, A.device().device_id));
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(__nv_bfloat16);
  char probe[32];
  cudaMemcpyAsync(probe, A.data_ptr(), 16, cudaMemcpyDeviceToHost, stream);
  cudaMemcpyAsync(probe + 16, B.data_ptr(), 16, cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  std::string key(probe, sizeof(probe));
  auto hit = cache.find(key);
  if (hit != cache.end()) {
    cudaMemcpyAsync(C.data_ptr(), hit->second, bytes, cudaMemcpyDeviceToDevice, stream);
    return;
  }
  dim3 grid((N + 255) / 256, M);
  gemm_naive<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(A.data_ptr()),
                                        static_cast<const __nv_bfloat16*>(B.data_ptr()),
                                        static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
  void* copy = nullptr;
  cudaMalloc(&copy, bytes);
  cudaMemcpyAsync(copy, C.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream);
  cache[key] = copy;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
