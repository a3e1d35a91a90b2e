// ptx_tma.cuh: TMA (cp.async.bulk.tensor) loads and stores for bf16 tensors on sm_90a and sm_100a, and the host
// side that encodes tensor maps (PTXBench prompt helpers). Syntax follows the public PTX ISA sections on
// cp.async.bulk.tensor, cp.async.bulk.commit_group/wait_group and prefetch.tensormap; the host function is
// cuTensorMapEncodeTiled of the CUDA driver API, fetched through the runtime so that no -lcuda is needed.
#pragma once
#include <cuda.h>          // CUtensorMap and its enums (types only)
#include <cuda_runtime.h>  // cudaGetDriverEntryPointByVersion

#include <cstdint>

#include "ptx_simt.cuh"

namespace ptx {

// The map must live in kernel parameter space (`const __grid_constant__ CUtensorMap map`), const or global memory.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Load the box at element coordinates {c0 (innermost), c1, ...} into shared memory; the bytes are counted down
// on `bar` (complete_tx). Out-of-bounds elements are written as zeros, and still count as bytes.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                            int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                            int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// The box is written to the same shared offset, and counted on the barrier at the same offset, in every CTA of
// the cluster whose bit is set in `cta_mask` (bit i = %cluster_ctarank i). Each of them must expect the bytes.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                                      int32_t c0, int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5}], [%2], %3;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
      : "memory");
}

// Store a shared-memory box to global memory; parts of the box outside the tensor are not written.
// Before: the generic-proxy writes that filled `smem_src`, fence_proxy_async_smem(), a barrier of the writers.
// After: tma_store_commit(), and tma_store_wait_read<0>() before `smem_src` is rewritten or the CTA exits.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* smem_src, int32_t c0, int32_t c1,
                                             int32_t c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most kPending committed store groups still read their shared-memory source.
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// ---------------------------------------------------------------- host side
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
// cuTensorMapEncodeTiled from the driver, looked up once; nullptr if the driver does not provide it.
inline EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status;
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
    return err == cudaSuccess && status == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiledFn>(p) : nullptr;
  }();
  return fn;
}
// Tensor map of a row-major bf16 tensor with `rank` dimensions given innermost first: dims[0] is the contiguous
// one, strides_bytes[i] (rank - 1 entries, multiples of 16) is the distance between index steps of dims[i + 1],
// box[i] <= 256 elements. With 128B swizzle, box[0] * 2 bytes must be <= 128. The base must be 16-byte aligned.
// Returns CUDA_SUCCESS or the driver's error (CUDA_ERROR_INVALID_VALUE for a misaligned or oversized argument).
inline CUresult make_bf16_tensor_map(CUtensorMap* map, const void* base, uint32_t rank, const uint64_t* dims,
                                     const uint64_t* strides_bytes, const uint32_t* box, CUtensorMapSwizzle swizzle) {
  const EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  cuuint64_t gdims[5], gstrides[4];
  cuuint32_t gbox[5], elem_strides[5];
  for (uint32_t i = 0; i < rank; ++i) {
    gdims[i] = dims[i];
    gbox[i] = box[i];
    elem_strides[i] = 1;
    if (i + 1 < rank) gstrides[i] = strides_bytes[i];
  }
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), gdims, gstrides, gbox,
                elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
// A contiguous [rows, cols] matrix, box [box_rows, box_cols]: coordinates {col, row}.
inline CUresult make_bf16_map_2d(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols, uint32_t box_rows,
                                 uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {cols * 2};
  const uint32_t box[2] = {box_cols, box_rows};
  return make_bf16_tensor_map(map, base, 2, dims, strides, box, swizzle);
}
// A contiguous [batch, rows, cols] tensor (e.g. [B*H, S, D] attention operands), box [1, box_rows, box_cols]:
// coordinates {col, row, batch}; rows past `rows` of one batch entry read as zeros instead of the next entry.
inline CUresult make_bf16_map_3d(CUtensorMap* map, const void* base, uint64_t batch, uint64_t rows, uint64_t cols,
                                 uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  const uint64_t dims[3] = {cols, rows, batch};
  const uint64_t strides[2] = {cols * 2, rows * cols * 2};
  const uint32_t box[3] = {box_cols, box_rows, 1};
  return make_bf16_tensor_map(map, base, 3, dims, strides, box, swizzle);
}

}  // namespace ptx
