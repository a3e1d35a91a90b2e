// Host-side helpers of the CUDA examples: argument checks on tvm-ffi TensorViews (they raise a Python
// exception with the message), the caller's stream, tensor maps over attention operands, launch errors.
#pragma once
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

#include "ptx_tma.cuh"

namespace host {

inline void check_cuda(const tvm::ffi::TensorView& t, const char* name) {
  TVM_FFI_CHECK(t.device().device_type == kDLCUDA, ValueError) << name << " must be on a CUDA device";
}

inline void check_bf16_matrix(const tvm::ffi::TensorView& t, const char* name) {
  check_cuda(t, name);
  TVM_FFI_CHECK(t.ndim() == 2 && t.dtype() == DLDataType({kDLBfloat, 16, 1}) && t.IsContiguous(), ValueError)
      << name << " must be a contiguous 2-D bfloat16 tensor";
  TVM_FFI_CHECK(t.size(1) % 8 == 0, ValueError) << name << ": TMA needs rows of a multiple of 16 bytes";
}

struct GemmShape {
  int64_t m, n, k;
};
// C[M, N] = A[M, K] @ B[N, K]^T, all bf16 (the FlashInfer gemm definitions).
inline GemmShape check_gemm(const tvm::ffi::TensorView& a, const tvm::ffi::TensorView& b,
                            const tvm::ffi::TensorView& c) {
  check_bf16_matrix(a, "A");
  check_bf16_matrix(b, "B");
  check_bf16_matrix(c, "C");
  const GemmShape shape{a.size(0), b.size(0), a.size(1)};
  TVM_FFI_CHECK(b.size(1) == shape.k && c.size(0) == shape.m && c.size(1) == shape.n, ValueError)
      << "expected A[M, K], B[N, K], C[M, N]";
  return shape;
}

// [B, H, S, head_dim] bf16 with the shape of q.
inline void check_bhsd(const tvm::ffi::TensorView& t, const char* name, const tvm::ffi::TensorView& q,
                       int64_t head_dim) {
  check_cuda(t, name);
  TVM_FFI_CHECK(t.ndim() == 4 && t.dtype() == DLDataType({kDLBfloat, 16, 1}) && t.IsContiguous(), ValueError)
      << name << " must be a contiguous [B, H, S, D] bfloat16 tensor";
  for (int i = 0; i < 4; ++i) TVM_FFI_CHECK(t.size(i) == q.size(i), ValueError) << name << " must match q's shape";
  TVM_FFI_CHECK(t.size(3) == head_dim, ValueError) << "this kernel is written for head_dim " << head_dim;
}
inline void check_lse(const tvm::ffi::TensorView& lse, const tvm::ffi::TensorView& q) {
  check_cuda(lse, "lse");
  TVM_FFI_CHECK(lse.ndim() == 3 && lse.dtype() == DLDataType({kDLFloat, 32, 1}) && lse.IsContiguous(), ValueError)
      << "lse must be a contiguous [B, H, S] float32 tensor";
  for (int i = 0; i < 3; ++i) TVM_FFI_CHECK(lse.size(i) == q.size(i), ValueError) << "lse must be [B, H, S]";
}

// The attention forward ABI: q, k, v, o [B, H, S, head_dim] bf16 and lse [B, H, S] fp32.
inline void check_attention_forward(const tvm::ffi::TensorView& q, const tvm::ffi::TensorView& k,
                                    const tvm::ffi::TensorView& v, const tvm::ffi::TensorView& o,
                                    const tvm::ffi::TensorView& lse, int64_t head_dim) {
  check_bhsd(q, "q", q, head_dim);
  check_bhsd(k, "k", q, head_dim);
  check_bhsd(v, "v", q, head_dim);
  check_bhsd(o, "o", q, head_dim);
  check_lse(lse, q);
}

inline cudaStream_t stream_of(const tvm::ffi::TensorView& t) {
  const DLDevice device = t.device();
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(device.device_type, device.device_id));
}

// Tensor map over a contiguous 2-D bf16 tensor: boxes of box_rows x box_cols.
inline CUtensorMap matrix_map(const tvm::ffi::TensorView& t, uint32_t box_rows, uint32_t box_cols,
                              CUtensorMapSwizzle swizzle) {
  CUtensorMap map;
  const CUresult res = ptx::make_bf16_map_2d(&map, t.data_ptr(), t.size(0), t.size(1), box_rows, box_cols, swizzle);
  TVM_FFI_CHECK(res == CUDA_SUCCESS, RuntimeError) << "cuTensorMapEncodeTiled failed with CUresult " << res;
  return map;
}

// Tensor map over a [B, H, S, D] tensor viewed as [B*H, S, D]: boxes of box_rows x 64 columns, 128B swizzle.
inline CUtensorMap bhsd_map(const tvm::ffi::TensorView& t, uint32_t box_rows) {
  CUtensorMap map;
  const CUresult res = ptx::make_bf16_map_3d(&map, t.data_ptr(), t.size(0) * t.size(1), t.size(2), t.size(3),
                                             box_rows, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  TVM_FFI_CHECK(res == CUDA_SUCCESS, RuntimeError) << "cuTensorMapEncodeTiled failed with CUresult " << res;
  return map;
}

// Raises with the launch error, if the last launch failed (configuration errors show up here, not later).
inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << what << " launch failed: " << cudaGetErrorString(err);
}

}  // namespace host
