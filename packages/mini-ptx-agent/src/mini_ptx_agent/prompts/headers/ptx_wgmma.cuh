// ptx_wgmma.cuh: warpgroup MMA (wgmma) helpers for sm_90a with bf16 inputs and fp32 accumulators, and the
// epilogue helpers that move accumulators out (PTXBench prompt helpers). Syntax and layouts follow the public PTX
// ISA sections "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (shapes, register fragments, shared
// memory matrix layouts, matrix descriptor) and stmatrix. Compile with -gencode=arch=compute_90a,code=sm_90a.
//
// Fragment layout of an m64nN fp32 accumulator `d[N/2]` in a warpgroup: warp w (0-3), lane l, r = 16w + l/4,
// c = 2*(l%4): d[4j+0], d[4j+1] are (r, 8j+c), (r, 8j+c+1); d[4j+2], d[4j+3] are (r+8, 8j+c), (r+8, 8j+c+1).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "ptx_simt.cuh"

namespace ptx {

// ---------------------------------------------------------------- shared-memory matrix descriptors
// 64 bits: start address >> 4 (bits 0-13), leading byte offset >> 4 (16-29), stride byte offset >> 4 (32-45),
// base offset (49-51, 0 when 128B-swizzled tiles start on 1024-byte boundaries), swizzle (62-63: 1 = 128B).
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_address, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4) | static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32 | static_cast<uint64_t>(1) << 62;
}
// K-major operand (K contiguous) in 128B-swizzled rows of 64 bf16, as TMA writes it with SWIZZLE_128B: 8-row
// groups are 1024 bytes apart, the leading offset is unused. The k16 step i inside a row starts at +32*i bytes.
__device__ __forceinline__ uint64_t desc_k_major_sw128(uint32_t smem_address) {
  return wgmma_desc(smem_address, 16, 1024);
}
// MN-major operand (M or N contiguous; use trans = 1) in 128B-swizzled rows of 64 bf16: rows are K, 8-row
// groups 1024 bytes apart; `lbo_bytes` is the distance between the 64-wide M/N chunks (the next [rows x 64]
// sub-tile). The k16 step i starts 16 rows later: +2048*i bytes.
__device__ __forceinline__ uint64_t desc_mn_major_sw128(uint32_t smem_address, uint32_t lbo_bytes) {
  return wgmma_desc(smem_address, lbo_bytes, 1024);
}

// ---------------------------------------------------------------- ordering
// Before the first wgmma of a batch whose accumulator or A-fragment registers were written by other code.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most kPending committed groups are in flight. Then fence_operands() the accumulators, so the
// compiler cannot move their reads above the wait (the wait names no registers).
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// ---------------------------------------------------------------- wgmma, bf16 x bf16 -> fp32
#define PTX_WGMMA_D32 "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
  "}"
#define PTX_WGMMA_D32_OPERANDS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define PTX_WGMMA_D64 "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
  "}"
#define PTX_WGMMA_D64_OPERANDS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// D[64 x N] (+)= A[64 x 16] * B[16 x N] with A and B in shared memory. kTransA/kTransB = 0: K-major, 1: MN-major.
// scale_d = 0 overwrites D, 1 accumulates. All 128 threads of the warpgroup execute it.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " PTX_WGMMA_D32 ", %32, %33, p, 1, 1, %35, %36;\n\t}"
      : PTX_WGMMA_D32_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB));
}
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " PTX_WGMMA_D64 ", %64, %65, p, 1, 1, %67, %68;\n\t}"
      : PTX_WGMMA_D64_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB));
}
// Same with A from registers: `a` is this thread's bf16x2 fragment of A[64 x 16] (see accumulator_to_a_fragments).
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                   int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " PTX_WGMMA_D32
      ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n\t}"
      : PTX_WGMMA_D32_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                    int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %69, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " PTX_WGMMA_D64
      ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n\t}"
      : PTX_WGMMA_D64_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}

// ---------------------------------------------------------------- accumulators out
// An m64nN fp32 accumulator as bf16 A fragments of N/16 k16 steps: the layouts line up, so the P of attention
// (or dS) feeds the next wgmma straight from registers. a[k] covers columns 16k..16k+15.
template <int N>
__device__ __forceinline__ void accumulator_to_a_fragments(const float (&d)[N / 2], uint32_t (&a)[N / 16][4]) {
#pragma unroll
  for (int k = 0; k < N / 16; ++k) {
    a[k][0] = pack_bf16x2(d[8 * k + 0], d[8 * k + 1]);  // row r,     columns 16k + c
    a[k][1] = pack_bf16x2(d[8 * k + 2], d[8 * k + 3]);  // row r + 8, columns 16k + c
    a[k][2] = pack_bf16x2(d[8 * k + 4], d[8 * k + 5]);  // row r,     columns 16k + 8 + c
    a[k][3] = pack_bf16x2(d[8 * k + 6], d[8 * k + 7]);  // row r + 8, columns 16k + 8 + c
  }
}
// scale * D as bf16 into a row-major global tile: `tile` is this warpgroup's element (0, 0), `ld` its row pitch in
// elements; rows >= valid_rows are skipped. 4-byte stores (fine for tiles written once).
template <int N>
__device__ __forceinline__ void store_accumulator_bf16(const float (&d)[N / 2], __nv_bfloat16* tile, int64_t ld,
                                                       int valid_rows, float scale) {
  const int lane = threadIdx.x % 32, row = 16 * ((threadIdx.x % 128) / 32) + lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (row + 8 * half < valid_rows) {
        *reinterpret_cast<uint32_t*>(tile + (row + 8 * half) * ld + 8 * j + col) =
            pack_bf16x2(scale * d[4 * j + 2 * half], scale * d[4 * j + 2 * half + 1]);
      }
    }
  }
}
// Four 8x8 b16 matrices from a warp into shared memory: lane l gives the address of row l%8 of matrix l/8;
// register i holds elements (l/4, 2*(l%4)) and (l/4, 2*(l%4)+1) of matrix i (the accumulator row-pair layout).
__device__ __forceinline__ void stmatrix_x4(uint32_t smem_row_address, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_row_address), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// scale * D as bf16 into shared memory in the 128B-swizzled layout a SWIZZLE_128B tensor map stores from: [64 x 64]
// sub-tiles of 128-byte rows, sub-tile t (columns 64t..64t+63) at tile_address + t * subtile_stride_bytes, which
// must be 1024-byte aligned. Follow with fence_proxy_async_smem(), a warpgroup barrier and the TMA store.
template <int N>
__device__ __forceinline__ void store_accumulator_smem_sw128(const float (&d)[N / 2], uint32_t tile_address,
                                                             uint32_t subtile_stride_bytes, float scale) {
  const int lane = threadIdx.x % 32, matrix = lane / 8;
  const int row = 16 * ((threadIdx.x % 128) / 32) + lane % 8 + 8 * (matrix & 1);
#pragma unroll
  for (int j = 0; j < N / 8; j += 2) {  // two 8-column blocks = one 16-byte chunk per matrix row
    const int chunk = j % 8 + (matrix >> 1);
    const uint32_t address = tile_address + (j / 8) * subtile_stride_bytes + row * 128 + ((chunk ^ (row % 8)) * 16);
    stmatrix_x4(address, pack_bf16x2(scale * d[4 * j + 0], scale * d[4 * j + 1]),
                pack_bf16x2(scale * d[4 * j + 2], scale * d[4 * j + 3]),
                pack_bf16x2(scale * d[4 * j + 4], scale * d[4 * j + 5]),
                pack_bf16x2(scale * d[4 * j + 6], scale * d[4 * j + 7]));
  }
}

}  // namespace ptx
