// Policy fixture: hands the GEMM to cuBLAS, which PTXBench forbids (rule cuda.library-call / -header).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

// a: [M, K] bf16, b: [N, K] bf16, c: [M, N] bf16 (row-major), computed as C^T = B A^T in column-major terms.
void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr) cublasCreate(&handle);
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1)), n = static_cast<int>(b.size(0));
  cublasSetStream(handle, static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id)));
  const float alpha = 1.0f, beta = 0.0f;
  cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b.data_ptr(), CUDA_R_16BF, k, a.data_ptr(),
               CUDA_R_16BF, k, &beta, c.data_ptr(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
