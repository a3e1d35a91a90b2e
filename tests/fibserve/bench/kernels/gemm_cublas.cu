// Hands the GEMM to cuBLAS: forbidden by the source policy. Expected: COMPILE_ERROR before anything is built.
#include <cublas_v2.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  cublasHandle_t handle;
  cublasCreate(&handle);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
