// Demo turn 2 (CUDA): a tiled shared-memory SIMT GEMM for gemm_n7168_k5120 (still CUDA cores only).
//   C[M, N] = A[M, K] @ B[N, K]^T, bf16 in and out, fp32 accumulation.
// A 256-thread block computes a 128 x 128 tile of C. Per 16-wide k step it stages A (128 x 16) and
// B (128 x 16) in shared memory as fp32, transposed to [k][row] so that the inner loop reads rows of
// both; each thread keeps an 8 x 8 register tile, so one shared-memory value feeds 8 FMAs. Loads past
// M, N or K read zero and stores past M or N are skipped: any M >= 0, any N and K.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

namespace {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 16;
constexpr int kTM = 8;  // rows of C per thread
constexpr int kTN = 8;  // columns of C per thread
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kPad = 4;  // spreads the transposed stores over banks; keeps rows 16-byte aligned

__global__ void __launch_bounds__(kThreads)
gemm_tiled_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                  __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[kBK][kBM + kPad];  // As[k][m] = A[row0 + m, k0 + k]
  __shared__ __align__(16) float Bs[kBK][kBN + kPad];  // Bs[k][n] = B[col0 + n, k0 + k]
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * kBM;
  const int col0 = blockIdx.x * kBN;
  const int tr = (tid / (kBN / kTN)) * kTM;  // first tile row of this thread
  const int tc = (tid % (kBN / kTN)) * kTN;  // first tile column of this thread

  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;
  }

  for (int k0 = 0; k0 < K; k0 += kBK) {
    // 128 x 16 elements per operand, 8 per thread; consecutive threads read consecutive k of a row.
    for (int i = tid; i < kBM * kBK; i += kThreads) {
      const int r = i / kBK, kk = i % kBK;
      const int gm = row0 + r, gk = k0 + kk;
      As[kk][r] = (gm < M && gk < K) ? __bfloat162float(A[static_cast<size_t>(gm) * K + gk]) : 0.0f;
    }
    for (int i = tid; i < kBN * kBK; i += kThreads) {
      const int r = i / kBK, kk = i % kBK;
      const int gn = col0 + r, gk = k0 + kk;
      Bs[kk][r] = (gn < N && gk < K) ? __bfloat162float(B[static_cast<size_t>(gn) * K + gk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      // 16-byte shared loads (rows are 528 bytes apart and tr, tc are multiples of 8, so they are aligned).
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][tr]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][tr + 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tc]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][tc + 4]);
      const float a[kTM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[kTN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();  // the tile is overwritten by the next k step
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int gm = row0 + tr + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int gn = col0 + tc + j;
      if (gn < N) C[static_cast<size_t>(gm) * N + gn] = __float2bfloat16(acc[i][j]);
    }
  }
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
  const dim3 grid(static_cast<unsigned>((N + kBN - 1) / kBN), static_cast<unsigned>((M + kBM - 1) / kBM));
  gemm_tiled_kernel<<<grid, kThreads, 0, stream>>>(a, b, c, static_cast<int>(M), static_cast<int>(N),
                                                   static_cast<int>(K));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "gemm_tiled_kernel launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
