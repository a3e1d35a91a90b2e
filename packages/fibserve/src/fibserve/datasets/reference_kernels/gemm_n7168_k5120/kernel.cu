// Reference Hopper (sm_90a) kernel for the FlashInfer Trace definition gemm_n7168_k5120:
//   C[M, N] = A[M, K] @ B[N, K]^T,  A, B, C bf16 row-major, N = 7168, K = 5120, M variable.
//
// Design (see README.md beside this file):
//   * Tile BM x BN x BK = 128 x BN x 64 with BN = 256 (large M), 224 (M whose 256-wide tile count
//     just overflows a wave of 132 CTAs) or 128 (small M, more CTAs); see pick_block_n.
//   * TMA (cp.async.bulk.tensor.2d) loads both K-major operands with 128-byte swizzle into a
//     STAGES-deep shared-memory ring; each stage has a "full" mbarrier (producer expect_tx, TMA
//     completes the bytes) and an "empty" mbarrier (one arrive per consumer warp).
//   * Warp specialization: warpgroup 0 is the producer (setmaxnreg.dec to 40 registers, one thread
//     issues TMA); warpgroups 1 and 2 are consumers (setmaxnreg.inc to 232), each owning 64 rows of
//     the tile and issuing wgmma.mma_async m64nBNk16 from shared-memory descriptors, f32 accumulators.
//   * Persistent grid: min(#tiles, #SMs) CTAs walk the tile list with a stride of gridDim.x, in a
//     grouped order (GROUP_M M-tiles share each N-tile) so that concurrently running CTAs reuse A and
//     B rows through L2.
//   * Epilogue: bf16 conversion in registers, stmatrix into a 2 KiB per-warp shared buffer, then
//     16-byte global stores that cover full 128-byte rows; rows >= M are not written. TMA
//     zero-fills the rows of A past M, so partial M tiles need no special loads.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

namespace {

constexpr int kBM = 128;           // rows of C per tile: two consumer warpgroups x 64
constexpr int kBK = 64;            // 64 bf16 = 128 bytes: one 128B swizzle atom row
#ifndef GEMM_GROUP_M
#define GEMM_GROUP_M 16  // overridable at build time for tuning sweeps
#endif
#ifndef GEMM_EPI_STMATRIX
#define GEMM_EPI_STMATRIX 1  // 1: stmatrix + 16-byte stores; 0: direct 4-byte stores
#endif
#ifndef GEMM_L2_PROMOTION
#define GEMM_L2_PROMOTION CU_TENSOR_MAP_L2_PROMOTION_L2_256B
#endif
#ifndef GEMM_ALLOW_BN224
#define GEMM_ALLOW_BN224 1  // 0: only 128 x 128 and 128 x 256 tiles
#endif
#ifndef GEMM_WGMMA_INFLIGHT
#define GEMM_WGMMA_INFLIGHT 0  // 1: keep one wgmma group in flight across k-blocks
#endif
constexpr int kGroupM = GEMM_GROUP_M;  // M-tiles per scheduling group (L2 reuse of B)
constexpr int kThreads = 384;      // 1 producer + 2 consumer warpgroups
constexpr int kProducerRegs = 40;  // 128*40 + 256*232 = 64512 <= 65536 registers per SM
constexpr int kConsumerRegs = 232;

// ---------------------------------------------------------------------------------------------
// PTX wrappers
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Spin until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// 2-D TMA tile load: box at (x = inner/K coordinate, y = row) into swizzled shared memory,
// completing `bytes` on the mbarrier. Rows past the tensor's extent are filled with zeros.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
#if GEMM_WGMMA_INFLIGHT
__device__ __forceinline__ void wgmma_wait_one() {
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
#endif

// Shared-memory matrix descriptor for a K-major operand stored with the 128-byte swizzle:
// rows of 128 bytes, 8-row core-matrix groups 1024 bytes apart (stride byte offset), leading
// byte offset unused for swizzled K-major layouts. Stage buffers are 1024-byte aligned, so the
// base-offset field stays 0; stepping 16 elements along K adds 32 bytes to the start address.
// Bit layout from the PTX ISA "Matrix Descriptor Format" for wgmma.
__device__ __forceinline__ uint64_t smem_desc_k_sw128(uint32_t addr) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);  // bits 0-13: start address >> 4
  desc |= static_cast<uint64_t>(1) << 16;                // bits 16-29: leading byte offset >> 4
  desc |= static_cast<uint64_t>(1024 >> 4) << 32;        // bits 32-45: stride byte offset >> 4
  desc |= static_cast<uint64_t>(1) << 62;                // bits 62-63: 1 = 128-byte swizzle
  return desc;
}

// One m64n128k16 bf16 wgmma: D[64x128] (+)= A[64x16] * B[128x16]^T, both operands from shared
// memory descriptors, f32 accumulators (64 per thread). scale_d == 0 overwrites D instead of adding.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// One m64n256k16 bf16 wgmma: D[64x256] (+)= A[64x16] * B[256x16]^T, both operands from shared
// memory descriptors, f32 accumulators (128 per thread). scale_d == 0 overwrites D instead of adding.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// One m64n224k16 bf16 wgmma: D[64x224] (+)= A[64x16] * B[224x16]^T, both operands from shared
// memory descriptors, f32 accumulators (112 per thread). scale_d == 0 overwrites D instead of adding.
__device__ __forceinline__ void wgmma_m64n224k16(float (&d)[112], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %114, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n224k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
      "}, %112, %113, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <int BN>
__device__ __forceinline__ void wgmma_tile_k16(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b,
                                               int scale_d) {
  if constexpr (BN == 256) {
    wgmma_m64n256k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (BN == 224) {
    wgmma_m64n224k16(d, desc_a, desc_b, scale_d);
  } else {
    static_assert(BN == 128, "BN must be 128, 224 or 256");
    wgmma_m64n128k16(d, desc_a, desc_b, scale_d);
  }
}

// ---------------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------------
template <int BN, int STAGES>
struct Config {
  static constexpr int kABytes = kBM * kBK * 2;  // bytes of one A stage (16 KiB)
  static constexpr int kBBytes = BN * kBK * 2;   // bytes of one B stage (16 or 32 KiB)
  static constexpr int kStageBytes = kABytes + kBBytes;
  // Ring of stages, epilogue staging, then 2*STAGES mbarriers; +1024 aligns the ring to the
  // 128B swizzle atom.
  // Epilogue staging: 2 KiB per consumer warp (16 rows x 64 columns of bf16), when enabled.
  static constexpr int kEpiBytes = GEMM_EPI_STMATRIX ? 8 * 2048 : 0;
  static constexpr int kSmemBytes = STAGES * kStageBytes + kEpiBytes + 2 * STAGES * 8 + 1024;
};

// Maps a linear tile index to (m_blk, n_blk): groups of kGroupM M-tiles walk all N-tiles with the
// M index fastest, so CTAs that run at the same time share B tiles (and A tiles) in L2.
__device__ __forceinline__ void tile_coords(int tile, int num_m, int num_n, int& m_blk, int& n_blk) {
  const int per_group = kGroupM * num_n;
  const int group = tile / per_group;
  const int first_m = group * kGroupM;
  const int group_m = min(num_m - first_m, kGroupM);
  const int in_group = tile - group * per_group;
  m_blk = first_m + in_group % group_m;
  n_blk = in_group / group_m;
}

#if GEMM_EPI_STMATRIX
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Stores one warp's 16 x BN slice of the accumulator tile (rows row0.., columns col0..) to C as
// bf16, 64 columns at a time through a 2 KiB per-warp shared buffer: stmatrix.x4 writes four 8x8
// fragments (the wgmma D layout is exactly stmatrix's), then each lane copies 16-byte chunks so
// one warp store covers four full 128-byte rows. 16-byte chunks are XOR-swizzled by row to keep
// both stmatrix and the reads free of bank conflicts. Rows >= M are skipped.
template <int BN>
__device__ __forceinline__ void store_tile_stmatrix(const float (&acc)[BN / 2],
                                                    __nv_bfloat16* __restrict__ c, int M, int N,
                                                    int row0, int col0, uint32_t buf, int lane) {
  const int mat = lane / 8;                      // which 8x8 fragment this lane addresses
  const int st_row = lane % 8 + 8 * (mat & 1);   // fragments 1 and 3: rows 8..15
#pragma unroll
  for (int chunk = 0; chunk < (BN + 63) / 64; ++chunk) {
    // 16-column pairs of 8-column blocks in this chunk: 4, or 2 in the last chunk of BN = 224.
    const int pairs = BN - chunk * 64 >= 64 ? 4 : (BN - chunk * 64) / 16;
#pragma unroll
    for (int jj = 0; jj < pairs; ++jj) {
      const int j = chunk * 8 + 2 * jj;           // first of two 8-column blocks
      const int cchunk = 2 * jj + (mat >> 1);     // 16-byte column chunk within the 64 columns
      const uint32_t addr = buf + st_row * 128 + ((cchunk ^ (st_row & 7)) * 16);
      asm volatile(
          "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
          "r"(pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1])),
          "r"(pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3])),
          "r"(pack_bf16x2(acc[4 * j + 4], acc[4 * j + 5])),
          "r"(pack_bf16x2(acc[4 * j + 6], acc[4 * j + 7]))
          : "memory");
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int row = lane / 8 + 4 * k;
      const int ch = lane % 8;
      uint32_t v0, v1, v2, v3;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                   : "r"(buf + row * 128 + ((ch ^ (row & 7)) * 16))
                   : "memory");
      if (ch < 2 * pairs && row0 + row < M) {
        const __nv_bfloat16* dst =
            c + static_cast<size_t>(row0 + row) * N + col0 + chunk * 64 + ch * 8;
        // 16-byte aligned: N, col0 and ch * 8 are multiples of 8 elements (checked on the host).
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v0), "r"(v1),
                     "r"(v2), "r"(v3)
                     : "memory");
      }
    }
    __syncwarp();  // the buffer is rewritten by the next chunk
  }
}
#endif

template <int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_bf16_tn_kernel(const __grid_constant__ CUtensorMap map_a,
                        const __grid_constant__ CUtensorMap map_b, __nv_bfloat16* __restrict__ c,
                        int M, int N, int K) {
  using Cfg = Config<BN, STAGES>;
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled TMA destinations and wgmma descriptors assume 1024-byte alignment.
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t smem_base = smem_u32(smem);
  const uint32_t epi_base = smem_base + STAGES * Cfg::kStageBytes;
  const uint32_t bar_base = epi_base + Cfg::kEpiBytes;
  auto stage_a = [&](int s) { return smem_base + s * Cfg::kStageBytes; };
  auto stage_b = [&](int s) { return smem_base + s * Cfg::kStageBytes + Cfg::kABytes; };
  auto full_bar = [&](int s) { return bar_base + s * 8; };
  auto empty_bar = [&](int s) { return bar_base + (STAGES + s) * 8; };

  const int num_m = (M + kBM - 1) / kBM;
  const int num_n = N / BN;
  const int num_tiles = num_m * num_n;
  const int num_kb = K / kBK;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar(s), 1);   // the producer's arrive.expect_tx; TMA completes the bytes
      mbar_init(empty_bar(s), 8);  // lane 0 of each of the 8 consumer warps
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---------------- producer warpgroup ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if (threadIdx.x == 0) {
      uint32_t it = 0;
      for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
        int m_blk, n_blk;
        tile_coords(tile, num_m, num_n, m_blk, n_blk);
        for (int kb = 0; kb < num_kb; ++kb, ++it) {
          const int s = it % STAGES;
          const uint32_t parity = (it / STAGES) & 1;
          mbar_wait(empty_bar(s), parity ^ 1);  // first pass: fresh barrier, returns at once
          mbar_arrive_expect_tx(full_bar(s), Cfg::kStageBytes);
          tma_load_2d(stage_a(s), &map_a, full_bar(s), kb * kBK, m_blk * kBM);
          tma_load_2d(stage_b(s), &map_b, full_bar(s), kb * kBK, n_blk * BN);
        }
      }
    }
  } else {
    // ---------------- consumer warpgroups ----------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    const int cw = warpgroup - 1;  // which 64-row half of the tile
    const int tid = threadIdx.x % 128;
    const int warp = tid / 32;
    const int lane = tid % 32;
    float acc[BN / 2];
    uint32_t it = 0;
    [[maybe_unused]] int prev_s = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      int m_blk, n_blk;
      tile_coords(tile, num_m, num_n, m_blk, n_blk);
      for (int kb = 0; kb < num_kb; ++kb, ++it) {
        const int s = it % STAGES;
        const uint32_t parity = (it / STAGES) & 1;
        mbar_wait(full_bar(s), parity);
        const uint32_t a_base = stage_a(s) + cw * 64 * kBK * 2;
        const uint32_t b_base = stage_b(s);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBK / 16; ++k) {
          wgmma_tile_k16<BN>(acc, smem_desc_k_sw128(a_base + k * 32),
                             smem_desc_k_sw128(b_base + k * 32), (kb > 0 || k > 0) ? 1 : 0);
        }
        wgmma_commit();
#if GEMM_WGMMA_INFLIGHT
        // Keep this k-block's wgmma group in flight; the previous group is complete now, so
        // its stage can go back to the producer.
        wgmma_wait_one();
        if (kb > 0 && lane == 0) mbar_arrive(empty_bar(prev_s));
        prev_s = s;
#else
        wgmma_wait_all();
        if (lane == 0) mbar_arrive(empty_bar(s));
#endif
      }
#if GEMM_WGMMA_INFLIGHT
      wgmma_wait_all();
      if (lane == 0) mbar_arrive(empty_bar(prev_s));
#endif
#if GEMM_EPI_STMATRIX
      store_tile_stmatrix<BN>(acc, c, M, N, m_blk * kBM + cw * 64 + warp * 16, n_blk * BN,
                              epi_base + (cw * 4 + warp) * 2048, lane);
#else
      // Epilogue. wgmma D fragment of m64nBN: thread (warp w, lane l) holds, for each 8-column
      // block j, rows 16w + l/4 (+8) and columns 8j + 2*(l%4) + {0, 1}:
      // acc[4j + 0..1] for row r, acc[4j + 2..3] for row r + 8.
      const int row0 = m_blk * kBM + cw * 64 + warp * 16 + lane / 4;
      const int row1 = row0 + 8;
      const int col0 = n_blk * BN + 2 * (lane % 4);
      __nv_bfloat16* c0 = c + static_cast<size_t>(row0) * N + col0;
      __nv_bfloat16* c1 = c + static_cast<size_t>(row1) * N + col0;
      const bool ok0 = row0 < M;
      const bool ok1 = row1 < M;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        if (ok0) {
          *reinterpret_cast<__nv_bfloat162*>(c0 + 8 * j) =
              __floats2bfloat162_rn(acc[4 * j + 0], acc[4 * j + 1]);
        }
        if (ok1) {
          *reinterpret_cast<__nv_bfloat162*>(c1 + 8 * j) =
              __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
        }
      }
#endif
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point, so the module needs no -lcuda.
EncodeTiledFn get_encode_tiled() {
  static EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                       cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || ptr == nullptr) {
      TVM_FFI_THROW(RuntimeError) << "cannot get cuTensorMapEncodeTiled from the CUDA driver: "
                                  << cudaGetErrorString(err);
    }
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// Tensor map over a row-major bf16 [rows, K] matrix, box [box_rows, 64], 128-byte swizzle,
// out-of-bounds elements read as zero.
CUtensorMap make_kmajor_map(const void* ptr, uint64_t rows, uint64_t k, uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k * 2};  // bytes between rows
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBK), box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUresult res = get_encode_tiled()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      GEMM_L2_PROMOTION, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) {
    TVM_FFI_THROW(RuntimeError) << "cuTensorMapEncodeTiled failed with CUresult " << res;
  }
  return map;
}

int sm_count(int device) {
  static int cached[64] = {0};
  if (device < 0 || device >= 64) device = 0;
  if (cached[device] == 0) {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    cached[device] = n > 0 ? n : 132;
  }
  return cached[device];
}

template <int BN, int STAGES>
void launch(const void* a, const void* b, void* c, int M, int N, int K, int device,
            cudaStream_t stream) {
  using Cfg = Config<BN, STAGES>;
  auto kernel = gemm_bf16_tn_kernel<BN, STAGES>;
  static bool attr_set = false;  // per template instance; the attribute is per function
  if (!attr_set) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           Cfg::kSmemBytes);
    if (err != cudaSuccess) {
      TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute(" << Cfg::kSmemBytes
                                  << " B shared memory) failed: " << cudaGetErrorString(err);
    }
    attr_set = true;
  }
  const CUtensorMap map_a = make_kmajor_map(a, M, K, kBM);
  const CUtensorMap map_b = make_kmajor_map(b, N, K, BN);
  const int num_tiles = ((M + kBM - 1) / kBM) * (N / BN);
  const int grid = num_tiles < sm_count(device) ? num_tiles : sm_count(device);
  kernel<<<grid, kThreads, Cfg::kSmemBytes, stream>>>(map_a, map_b,
                                                       static_cast<__nv_bfloat16*>(c), M, N, K);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << "gemm kernel launch failed: " << cudaGetErrorString(err);
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
  if ((reinterpret_cast<uintptr_t>(t.data_ptr()) + t.byte_offset()) % 16 != 0) {
    TVM_FFI_THROW(ValueError) << name << " must be 16-byte aligned for TMA";
  }
}

// Picks the N tile by estimated time per SM: (persistent waves) * BN * a per-shape efficiency
// charge (BN = 256: 1.00, 224: 1.02, 128: 1.15, for their lower operand reuse per wgmma). Small M
// gets BN = 128 (twice the CTAs); M whose 256-wide tile count just overflows a wave gets 224
// (7168 = 32 * 224) when GEMM_ALLOW_BN224 is set; large M gets 256.
int pick_block_n(int64_t M, int64_t N, int64_t sms) {
  const int64_t num_m = (M + kBM - 1) / kBM;
  int best = 128;
  int64_t best_cost = -1;
  const int candidates[3] = {256, GEMM_ALLOW_BN224 ? 224 : 0, 128};
  const int charge[3] = {100, 102, 115};
  for (int i = 0; i < 3; ++i) {
    const int bn = candidates[i];
    if (bn == 0 || N % bn != 0) continue;
    const int64_t waves = (num_m * (N / bn) + sms - 1) / sms;
    const int64_t cost = waves * bn * charge[i];
    if (best_cost < 0 || cost < best_cost) {
      best = bn;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

// C[M, N] = A[M, K] @ B[N, K]^T in bf16 (f32 accumulation). Destination passing: C is written,
// nothing is returned. Requires K % 64 == 0 and N % 128 == 0 (the definition has N = 7168,
// K = 5120); any M >= 0.
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  check_bf16_2d(A, "A");
  check_bf16_2d(B, "B");
  check_bf16_2d(C, "C");
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  if (B.size(1) != K) TVM_FFI_THROW(ValueError) << "B must be [N, K] with K = " << K;
  if (C.size(0) != M || C.size(1) != N) TVM_FFI_THROW(ValueError) << "C must be [M, N]";
  if (K % kBK != 0 || K == 0) TVM_FFI_THROW(ValueError) << "K must be a positive multiple of 64";
  if (N % 128 != 0) TVM_FFI_THROW(ValueError) << "N must be a multiple of 128";
  if (M == 0) return;
  const int device = A.device().device_id;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  const char* a = static_cast<const char*>(A.data_ptr()) + A.byte_offset();
  const char* b = static_cast<const char*>(B.data_ptr()) + B.byte_offset();
  char* c = static_cast<char*>(C.data_ptr()) + C.byte_offset();

  const int bn = pick_block_n(M, N, sm_count(device));
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  if (bn == 256) {
    launch<256, 4>(a, b, c, m, n, k, device, stream);
  } else if (bn == 224) {
    launch<224, 4>(a, b, c, m, n, k, device, stream);
  } else {
    launch<128, 6>(a, b, c, m, n, k, device, stream);
  }
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
