// Hostile (tests only): a correct vector add for vector_add_f32 whose host code, from its first timed call on,
// holds all but 64 MiB of the GPU's free memory and never frees it, so that the timing twins that start or
// allocate after it fail (the driver has no per-process memory limit). Its own cold-L2 buffer was allocated
// before that call. The evaluator must blame the candidate, not report a harness error.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <cuda_runtime.h>

#include <vector>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

static int calls = 0;
static std::vector<void*> held;

static void hold_memory() {
  const size_t keep = size_t(64) << 20;
  size_t chunk = size_t(1) << 30;
  while (chunk >= (size_t(2) << 20)) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    void* p = nullptr;
    if (free_bytes < keep + chunk || cudaMalloc(&p, chunk) != cudaSuccess) {
      cudaGetLastError();
      chunk /= 2;
      continue;
    }
    held.push_back(p);
  }
}

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView out) {
  // correctness makes one call per input set (3 by default); the fourth is the first timed one
  if (++calls == 4) hold_memory();
  int64_t n = a.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(a.data_ptr()), static_cast<const float*>(b.data_ptr()), static_cast<float*>(out.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
