// ptx_mbarrier.cuh: mbarrier helpers for sm_90a and sm_100a (PTXBench prompt helpers), and a ring position for
// producer/consumer pipelines. Syntax follows the public PTX ISA sections on mbarrier and fence.mbarrier_init.
#pragma once
#include <cstdint>

#include "ptx_simt.cuh"

namespace ptx {

// An mbarrier is a 64-bit object in shared memory (8-byte aligned). `count` = arrivals that complete a phase.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// After the inits, before TMA or other CTAs of the cluster use the barriers (then sync the block or cluster).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival (a consumer releasing a stage).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// One arrival plus `bytes` expected transaction bytes for the current phase (a producer, before its TMA loads).
// The bytes must equal what the loads naming this barrier deliver: full boxes, even where they fall out of bounds.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// One arrival on the barrier at the same shared offset in CTA `cta_rank` of the cluster (may be this CTA).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
  const uint32_t remote = map_to_cta(smem_addr(bar), cta_rank);
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
// True once the phase with parity `parity` (0 or 1) has completed; gives up after a hardware time limit.
// A fresh barrier reports parity 1 as complete, so a producer's first wait on an "empty" barrier passes.
__device__ __forceinline__ bool mbar_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbar_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!mbar_try_wait_parity(bar, parity)) {
  }
}

// Position in a ring of kStages buffers: the stage to use and the parity of the phase to wait for.
// Producer: wait empty[stage] with phase ^ 1, fill, signal full[stage]. Consumer: wait full[stage] with phase,
// use, arrive on empty[stage]. Both call advance() after each buffer.
template <int kStages>
struct RingPosition {
  uint32_t stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

}  // namespace ptx
