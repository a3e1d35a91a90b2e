// Policy fixture: reaches cuBLAS without ever spelling it. The name is pasted together by the preprocessor
// and declared by hand, so the source scan sees nothing; the built library still imports cublasSscal_v2
// (resolved at load time against the cuBLAS that torch loads into the worker), which the binary check finds.
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#define PASTE_IMPL(a, b) a##b
#define PASTE(a, b) PASTE_IMPL(a, b)
#define HIDDEN_SCAL PASTE(cub, lasSscal_v2)

extern "C" int HIDDEN_SCAL(void* handle, int n, const float* alpha, float* x, int incx);

// x: [n] float32, scaled by 2 in place (the handle is never created: this only has to build).
void run(tvm::ffi::TensorView x) {
  const float alpha = 2.0f;
  HIDDEN_SCAL(nullptr, static_cast<int>(x.size(0)), &alpha, static_cast<float*>(x.data_ptr()), 1);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
