// A correct naive GEMM on the harness's stream that, after returning, has a host thread launch ~0.5 ms of
// busy-spinning on a private stream: work that runs after the worker replied, while the harness times the
// baseline next. A: [M, K] bf16, B: [N, K] bf16, C: [M, N] bf16. Before the device-idle wait, the baseline
// timed after it read 0.126 ms instead of 0.01 ms and its speedup came out 7x the honest kernel's; now the
// comparator waits for the device to drain (scripts/gpu_suite.py, leftover_work_does_not_slow_the_baseline).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <chrono>
#include <thread>

__global__ void gemm_naive(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t M,
                           int64_t N, int64_t K) {
  int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t row = blockIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < K; ++k) acc += __bfloat162float(A[row * K + k]) * __bfloat162float(B[col * K + k]);
  C[row * N + col] = __float2bfloat16(acc);
}

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  if (B.size(1) != K || C.size(0) != M || C.size(1) != N) TVM_FFI_THROW(ValueError) << "shape mismatch";
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, A.device().device_id));
  dim3 grid((N + 255) / 256, M);
  gemm_naive<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(A.data_ptr()),
                                        static_cast<const __nv_bfloat16*>(B.data_ptr()),
                                        static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
  int device = static_cast<int>(A.device().device_id);
  std::thread([device] {
    cudaSetDevice(device);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // after the worker has replied
    static cudaStream_t side = nullptr;
    if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    spin<<<132, 128, 0, side>>>(1000000LL);  // about 0.5 ms at 1.98 GHz, on every SM
  }).detach();
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
