// Demo turn 1 (CUDA): a simple, correct SIMT GEMM for gemm_n7168_k5120.
//   C[M, N] = A[M, K] @ B[N, K]^T, bf16 in and out, fp32 accumulation.
// One thread computes one element of C with a dot product over K. No shared memory, no tensor cores:
// it is the correctness baseline the later turns improve on. Rows are read 8 bf16 (16 bytes) at a time
// when K % 8 == 0 and the operands are 16-byte aligned, else one element at a time. Any M >= 0, N, K.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

namespace {

constexpr int kBlock = 16;  // 16 x 16 threads, each one output element

__global__ void gemm_simt_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                 __nv_bfloat16* __restrict__ C, int M, int N, int K, bool vec8) {
  const int n = blockIdx.x * kBlock + threadIdx.x;
  const int m = blockIdx.y * kBlock + threadIdx.y;
  if (m >= M || n >= N) return;
  const __nv_bfloat16* a = A + static_cast<size_t>(m) * K;
  const __nv_bfloat16* b = B + static_cast<size_t>(n) * K;
  float acc = 0.0f;
  if (vec8) {  // uniform across the grid: K % 8 == 0 and 16-byte aligned rows
    for (int k = 0; k < K; k += 8) {
      const uint4 av = *reinterpret_cast<const uint4*>(a + k);
      const uint4 bv = *reinterpret_cast<const uint4*>(b + k);
      const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&av);
      const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bv);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 x = __bfloat1622float2(a2[i]);
        const float2 y = __bfloat1622float2(b2[i]);
        acc = fmaf(x.x, y.x, acc);
        acc = fmaf(x.y, y.y, acc);
      }
    }
  } else {
    for (int k = 0; k < K; ++k) acc = fmaf(__bfloat162float(a[k]), __bfloat162float(b[k]), acc);
  }
  C[static_cast<size_t>(m) * N + n] = __float2bfloat16(acc);
}

void check_bf16_2d(const tvm::ffi::TensorView& t, const char* name) {
  if (t.ndim() != 2) TVM_FFI_THROW(ValueError) << name << " must be 2-D, got " << t.ndim() << "-D";
  const DLDataType dt = t.dtype();
  if (dt.code != kDLBfloat || dt.bits != 16 || dt.lanes != 1) {
    TVM_FFI_THROW(TypeError) << name << " must be bfloat16";
  }
  if (t.device().device_type != kDLCUDA) TVM_FFI_THROW(ValueError) << name << " must be on CUDA";
  if (!t.IsContiguous()) TVM_FFI_THROW(ValueError) << name << " must be contiguous (row-major)";
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  check_bf16_2d(A, "A");
  check_bf16_2d(B, "B");
  check_bf16_2d(C, "C");
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  if (B.size(1) != K) TVM_FFI_THROW(ValueError) << "B must be [N, K] with K = " << K;
  if (C.size(0) != M || C.size(1) != N) TVM_FFI_THROW(ValueError) << "C must be [M, N]";
  if (M == 0 || N == 0) return;
  const int device = A.device().device_id;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(static_cast<const char*>(A.data_ptr()) + A.byte_offset());
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(static_cast<const char*>(B.data_ptr()) + B.byte_offset());
  auto* c = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(C.data_ptr()) + C.byte_offset());
  const dim3 block(kBlock, kBlock);
  const dim3 grid(static_cast<unsigned>((N + kBlock - 1) / kBlock), static_cast<unsigned>((M + kBlock - 1) / kBlock));
  const bool vec8 = K % 8 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
  gemm_simt_kernel<<<grid, block, 0, stream>>>(a, b, c, static_cast<int>(M), static_cast<int>(N),
                                                static_cast<int>(K), vec8);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "gemm_simt_kernel launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
