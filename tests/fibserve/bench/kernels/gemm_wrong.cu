// Wrong GEMM for gemm_n7168_k5120: accumulates only the first half of K. Expected: INCORRECT_NUMERICAL.
// A: [M, K] bf16, B: [N, K] bf16, C: [M, N] bf16 (C = A @ B.T).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

__global__ void gemm_naive(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t M,
                           int64_t N, int64_t K) {
  int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t row = blockIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < K / 2; ++k) acc += __bfloat162float(A[row * K + k]) * __bfloat162float(B[col * K + k]);
  C[row * N + col] = __float2bfloat16(acc);
}

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  if (B.size(1) != K || C.size(0) != M || C.size(1) != N) TVM_FFI_THROW(ValueError) << "shape mismatch";
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, A.device().device_id));
  dim3 grid((N + 255) / 256, M);
  gemm_naive<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(A.data_ptr()),
                                        static_cast<const __nv_bfloat16*>(B.data_ptr()),
                                        static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
