// blackwell_tcgen05.cuh: small inline-PTX helpers for tcgen05 / tensor memory on sm_100a, written for PTXBench
// prompts. Paste the helpers you need into your kernel file. Syntax follows the public PTX ISA (8.7+) sections
// on tcgen05. TMA and mbarrier helpers are the same as on Hopper. Compile with
// -gencode=arch=compute_100a,code=sm_100a.
#pragma once
#include <cstdint>

namespace bw {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- tensor memory allocation (one full warp)
// Allocates `ncols` columns (power of two, 32..512) of all 128 lanes; the TMEM base address is written to
// `*slot` in shared memory. Read it after a __syncthreads() (with tcgen05 fences around the barrier).
__device__ __forceinline__ void tmem_alloc(uint32_t* slot, uint32_t ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(slot)),
               "r"(ncols)
               : "memory");
}
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
}

// ---------------------------------------------------------------- descriptors
// Instruction descriptor for .kind::f16 with BF16 A/B, FP32 D, both operands K-major, dense.
// Bits: 4-5 D type (1 = F32), 7-9 A type (1 = BF16), 10-12 B type (1 = BF16), 15/16 transpose A/B,
// 17-22 N >> 3, 24-28 M >> 4.
__host__ __device__ constexpr uint32_t make_idesc_bf16_f32(uint32_t m, uint32_t n) {
  return (1u << 4) | (1u << 7) | (1u << 10) | ((n >> 3) << 17) | ((m >> 4) << 24);
}
// Shared-memory matrix descriptor for tcgen05: like Hopper's, plus the fixed 0b001 in bits 46-48 and a 3-bit
// swizzle field in bits 61-63 (0 none, 1 = 128B with 32B atoms, 2 = 128B, 4 = 64B, 6 = 32B).
enum Swizzle : uint32_t { kSwizzleNone = 0, kSwizzle128B = 2, kSwizzle64B = 4, kSwizzle32B = 6 };
__device__ __forceinline__ uint64_t make_smem_desc(const void* smem_ptr, uint32_t leading_byte_offset,
                                                   uint32_t stride_byte_offset, uint32_t swizzle) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr(smem_ptr) >> 4) & 0x3FFF);
  desc |= static_cast<uint64_t>((leading_byte_offset >> 4) & 0x3FFF) << 16;
  desc |= static_cast<uint64_t>((stride_byte_offset >> 4) & 0x3FFF) << 32;
  desc |= static_cast<uint64_t>(1) << 46;
  desc |= static_cast<uint64_t>(swizzle & 0x7) << 61;
  return desc;
}

// ---------------------------------------------------------------- MMA (issued by ONE thread)
// D[tmem] (+)= A[smem] * B[smem]; accumulate = 0 overwrites D.
__device__ __forceinline__ void mma_bf16_ss(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                            uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)
      : "memory");
}
// `bar` receives one arrival when every tcgen05 operation issued so far by this thread has completed.
__device__ __forceinline__ void mma_commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_addr(bar))
               : "memory");
}

// ---------------------------------------------------------------- TMEM -> registers
// Warp w (of its warpgroup) reads lanes 32*(w%4) .. +31: thread i gets lane 32*(w%4)+i, columns taddr.col .. +7.
__device__ __forceinline__ void tmem_ld_32x32b_x8(uint32_t taddr, uint32_t (&r)[8]) {
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
               : "r"(taddr));
}
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }

// ---------------------------------------------------------------- ordering around thread barriers
__device__ __forceinline__ void fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

}  // namespace bw
