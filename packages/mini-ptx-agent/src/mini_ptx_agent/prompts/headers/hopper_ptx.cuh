// hopper_ptx.cuh: small inline-PTX helpers for sm_90a (Hopper), written for PTXBench prompts.
// Everything is header-only and `__forceinline__`; paste the helpers you need into your kernel file.
// PTX syntax follows the public PTX ISA (8.x) sections on mbarrier, cp.async.bulk.tensor, wgmma,
// setmaxnreg, stmatrix and fence.proxy.async. Compile with -gencode=arch=compute_90a,code=sm_90a.
#pragma once
#include <cstdint>
#include <cuda.h>          // CUtensorMap and the tensor-map enums (no libcuda link needed, see below)
#include <cuda_runtime.h>  // cudaGetDriverEntryPointByVersion

namespace hp {

// ---------------------------------------------------------------- addresses
// 32-bit shared-window address of a generic pointer to shared memory (what PTX `[%r]` operands expect).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- mbarrier (a 64-bit object in shared memory)
// `count` = number of arrivals (mbarrier.arrive calls) that complete one phase.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Make barrier initialisation visible to the async proxy (TMA) and to other CTAs of the cluster.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival plus "expect `bytes` more transaction bytes in this phase" (the producer, before issuing TMA).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// Plain arrival (a consumer releasing a stage back to the producer).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Arrival on the barrier at the same shared offset in CTA `cta_rank` of this cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n\t}" ::"r"(smem_addr(bar)),
      "r"(cta_rank)
      : "memory");
}
// True once the phase with parity `phase_parity` (0 or 1) has completed. Non-blocking beyond a HW timeout.
__device__ __forceinline__ bool mbar_try_wait_parity(uint64_t* bar, uint32_t phase_parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(phase_parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbar_wait_parity(uint64_t* bar, uint32_t phase_parity) {
  while (!mbar_try_wait_parity(bar, phase_parity)) {
  }
}

// ---------------------------------------------------------------- TMA (cp.async.bulk.tensor)
// The map must live in kernel parameter space (`const __grid_constant__ CUtensorMap`), global or const memory.
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// Load the box at element coordinates (c0 = innermost/contiguous, c1 = outer) into shared memory;
// completion is signalled as transaction bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                            int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}
// Same, but the box is written to the same smem offset (and signalled on the same barrier offset) in every
// CTA whose bit is set in `cta_mask` (bit i = cluster CTA rank i).
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                                      int32_t c0, int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5}], [%2], %3;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
      : "memory");
}
// Store a shared-memory box to global memory. Call fence_proxy_async_smem() after the generic-proxy writes
// that filled `smem_src`, then tma_store_commit(), and tma_store_wait_read() before reusing `smem_src`.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src, int32_t c0,
                                             int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
// Order this thread's generic-proxy shared-memory accesses before later async-proxy (TMA, wgmma) accesses.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Host side: cuTensorMapEncodeTiled is a driver API; fetch it through the runtime so no -lcuda is needed.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline EncodeTiledFn get_encode_tiled() {
  static EncodeTiledFn fn = nullptr;
  if (fn == nullptr) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status) ==
            cudaSuccess &&
        status == cudaDriverEntryPointSuccess) {
      fn = reinterpret_cast<EncodeTiledFn>(p);
    }
  }
  return fn;
}
// 2D row-major tensor [rows, cols] with `row_stride_bytes` (multiple of 16) and a box of [box_rows, box_cols].
// With 128B swizzle, box_cols * sizeof(element) must be <= 128. Returns CUDA_SUCCESS or the driver error.
inline CUresult make_tensor_map_2d(CUtensorMap* map, const void* gptr, CUtensorMapDataType dtype, uint64_t rows,
                                   uint64_t cols, uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols,
                                   CUtensorMapSwizzle swizzle) {
  EncodeTiledFn encode = get_encode_tiled();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  cuuint64_t dims[2] = {cols, rows};          // innermost first
  cuuint64_t strides[1] = {row_stride_bytes};  // rank-1 strides, bytes
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, dtype, 2, const_cast<void*>(gptr), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// ---------------------------------------------------------------- wgmma
// Swizzle codes of the sm_90 shared-memory matrix descriptor (bits 62-63).
enum SmemSwizzle : uint32_t { kSwizzleNone = 0, kSwizzle128B = 1, kSwizzle64B = 2, kSwizzle32B = 3 };

// 64-bit matrix descriptor: bits 0-13 start address >> 4, bits 16-29 leading-dimension byte offset >> 4,
// bits 32-45 stride-dimension byte offset >> 4, bits 49-51 base offset (0 when tiles are 1024B aligned for 128B
// swizzle), bits 62-63 swizzle mode.
__device__ __forceinline__ uint64_t make_smem_desc(const void* smem_ptr, uint32_t leading_byte_offset,
                                                   uint32_t stride_byte_offset, uint32_t swizzle) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr(smem_ptr) >> 4) & 0x3FFF);
  desc |= static_cast<uint64_t>((leading_byte_offset >> 4) & 0x3FFF) << 16;
  desc |= static_cast<uint64_t>((stride_byte_offset >> 4) & 0x3FFF) << 32;
  desc |= static_cast<uint64_t>(swizzle & 0x3) << 62;
  return desc;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keep the compiler from moving accumulator reads/writes across wgmma boundaries.
__device__ __forceinline__ void fence_accumulator(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// D[64x64] (+)= A[64x16] * B[16x64]; A and B bf16 in shared memory (K-major, i.e. both tiles stored with K
// contiguous), D fp32 in registers: 32 floats per thread. scale_d = 0 overwrites D, 1 accumulates.
__device__ __forceinline__ void wgmma_m64n64k16_f32_bf16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                         int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// ---------------------------------------------------------------- warp specialization and clusters
// Warpgroup-wide register budget change; all 128 threads of the warpgroup must execute it.
// Values are per thread, a multiple of 8 in [24, 256]. Needs __launch_bounds__(threads, 1).
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
// True in exactly one (the lowest) active lane of the warp.
__device__ __forceinline__ bool elect_one_sync() {
  uint32_t is_leader;
  asm volatile(
      "{\n\t.reg .b32 lane;\n\t.reg .pred p;\n\t"
      "elect.sync lane|p, %1;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(is_leader)
      : "r"(0xFFFFFFFFu));
  return is_leader != 0;
}
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Full cluster barrier (all threads of all CTAs of the cluster), with release/acquire ordering.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---------------------------------------------------------------- stmatrix
// Each of the 4 registers holds two b16 values of one 8x8 matrix fragment (same layout as an mma accumulator
// row pair); lanes 8i..8i+7 supply the row addresses of matrix i.
__device__ __forceinline__ void stmatrix_x4(void* smem_row_ptr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr(smem_row_ptr)),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// Pack two floats into one b32 register of bf16x2 (low half = `lo`).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

}  // namespace hp
