// ptx_umma.cuh: tcgen05 (UMMA) and tensor memory helpers for sm_100a with bf16 inputs and fp32 accumulators
// (PTXBench prompt helpers). Syntax and bit layouts follow the public PTX ISA chapter on tcgen05 (tensor memory,
// tcgen05.alloc/dealloc, tcgen05.mma, the instruction and shared-memory descriptors, tcgen05.commit, tcgen05.ld/st,
// tcgen05 fences). TMA and mbarrier helpers are the common ones. Compile with -gencode=arch=compute_100a,code=sm_100a.
#pragma once
#include <cstdint>

#include "ptx_simt.cuh"

namespace ptx {

// ---------------------------------------------------------------- tensor memory allocation (one whole warp)
// Allocates `ncols` columns (a power of two, 32..512) of all 128 lanes and writes the TMEM address (lane in bits
// 31-16, column in bits 15-0) to `*slot` in shared memory. Read it after fence_before_thread_sync(), a block
// barrier and fence_after_thread_sync(). The same warp frees it with tmem_dealloc before the CTA exits.
// kCtaGroup = 2 allocates for a CTA pair (both CTAs of a cluster of 2 call it).
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_alloc(uint32_t* slot, uint32_t ncols) {
  if constexpr (kCtaGroup == 1) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(slot)),
                 "r"(ncols)
                 : "memory");
  } else {
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(slot)),
                 "r"(ncols)
                 : "memory");
  }
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  if constexpr (kCtaGroup == 1) {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  } else {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
  }
}
template <int kCtaGroup = 1>
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  if constexpr (kCtaGroup == 1) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
  } else {
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
  }
}

// ---------------------------------------------------------------- descriptors
// Instruction descriptor of .kind::f16 for bf16 A and B, fp32 D, dense: bits 4-5 D format (1 = f32), 7-9 A format
// (1 = bf16), 10-12 B format (1 = bf16), 15 A MN-major, 16 B MN-major (0 = K-major), 17-22 N >> 3, 24-28 M >> 4.
__host__ __device__ constexpr uint32_t umma_idesc_bf16(uint32_t m, uint32_t n, bool a_mn_major, bool b_mn_major) {
  return (1u << 4) | (1u << 7) | (1u << 10) | (static_cast<uint32_t>(a_mn_major) << 15) |
         (static_cast<uint32_t>(b_mn_major) << 16) | ((n >> 3) << 17) | ((m >> 4) << 24);
}
// Shared-memory descriptor: the wgmma fields plus the fixed 0b001 in bits 46-48 and a 3-bit swizzle in bits
// 61-63 (0 none, 2 = 128B, 4 = 64B, 6 = 32B, 1 = 128B with 32-byte atoms). Here always 128B.
__device__ __forceinline__ uint64_t umma_desc(uint32_t smem_address, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4) | static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32 | static_cast<uint64_t>(1) << 46 |
         static_cast<uint64_t>(2) << 61;
}
// K-major tile in 128B-swizzled rows of 64 bf16 (what TMA writes with SWIZZLE_128B): k16 step i at +32*i bytes.
__device__ __forceinline__ uint64_t umma_desc_k_major_sw128(uint32_t smem_address) {
  return umma_desc(smem_address, 16, 1024);
}
// MN-major tile (rows are K): `lbo_bytes` = distance between 64-wide M/N chunks; k16 step i at +2048*i bytes.
__device__ __forceinline__ uint64_t umma_desc_mn_major_sw128(uint32_t smem_address, uint32_t lbo_bytes) {
  return umma_desc(smem_address, lbo_bytes, 1024);
}

// ---------------------------------------------------------------- MMA, issued by ONE thread for the CTA
// D[tmem] (+)= A[smem] * B[smem] for a K = 16 step; accumulate = 0 overwrites D. kCtaGroup = 2: a CTA pair
// computes an M = 256 (or 128) tile over both CTAs' shared and tensor memory, issued by the even CTA only.
template <int kCtaGroup = 1>
__device__ __forceinline__ void umma_bf16_ss(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                             uint32_t accumulate) {
  if constexpr (kCtaGroup == 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)
        : "memory");
  } else {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)
        : "memory");
  }
}
// `bar` gets one arrival when every tcgen05 operation this thread issued before has completed.
__device__ __forceinline__ void umma_commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_addr(bar))
               : "memory");
}
// The CTA-pair commit: one arrival on the barrier at this offset in every CTA of `cta_mask`.
__device__ __forceinline__ void umma_commit_pair_multicast(uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;" ::"r"(
          smem_addr(bar)),
      "h"(cta_mask)
      : "memory");
}

// ---------------------------------------------------------------- tensor memory <-> registers
// Warp w of a warpgroup may touch lanes 32*(w%4) .. 32*(w%4)+31 only: thread i of the warp gets lane
// 32*(w%4)+i, columns taddr.col .. taddr.col+15 (one fp32 accumulator element per column).
__device__ __forceinline__ void tmem_ld_32x32b_x16(uint32_t taddr, uint32_t (&r)[16]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},"
      " [%16];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]),
        "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15])
      : "r"(taddr)
      : "memory");
}
__device__ __forceinline__ void tmem_st_32x32b_x16(uint32_t taddr, const uint32_t (&r)[16]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x16.b32 [%0],"
      " {%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16};" ::"r"(taddr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]), "r"(r[8]), "r"(r[9]),
      "r"(r[10]), "r"(r[11]), "r"(r[12]), "r"(r[13]), "r"(r[14]), "r"(r[15])
      : "memory");
}
// tcgen05.ld/st are asynchronous: wait before using loaded registers (then fence_operands them), or before
// others read what was stored.
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }

// ---------------------------------------------------------------- ordering around thread synchronisation
// tcgen05 work ordered by a barrier or an mbarrier wait: before_thread_sync on the signalling side, then the
// barrier, then after_thread_sync on the waiting side.
__device__ __forceinline__ void fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

}  // namespace ptx
