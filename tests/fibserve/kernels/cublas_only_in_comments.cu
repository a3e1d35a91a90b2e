// Policy fixture: "cublas" appears only in comments and string literals, so the policy accepts it.
// A cuBLAS version would call cublasGemmEx(handle, ...) here; we scale a vector instead.
/* #include <cublas_v2.h>
   cublasGemmEx(...) */
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

static const char* kNote = "not cublasGemmEx, not cudnnConvolutionForward";
static const char* kRaw = R"note(cutlass::gemm::device::Gemm is not used either)note";

__global__ void scale_kernel(const float* x, float* y, float s, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = s * x[i];
}

// x: [n] float32, y: [n] float32 (y = 2 x).
void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  TVM_FFI_ICHECK(kNote != nullptr && kRaw != nullptr);
  const int64_t n = x.size(0);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  scale_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()), 2.0f, n);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
