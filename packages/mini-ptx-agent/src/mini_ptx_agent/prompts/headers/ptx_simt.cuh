// ptx_simt.cuh: SIMT basics shared by the sm_90a and sm_100a helpers (PTXBench prompt helpers).
// Aligned dynamic shared memory, warp-uniform indices, leader election, quad reductions, fast exp2, bf16
// packing, named barriers, proxy fences, setmaxnreg, clusters and distributed shared memory (sm_90 and later).
// Syntax follows the public PTX ISA (elect.sync, bar.sync/bar.arrive, fence.proxy.async, setmaxnreg,
// barrier.cluster, mapa, ld.shared::cluster).
#pragma once
#include <cstdint>

namespace ptx {

// 32-bit shared-window address of a generic pointer to shared memory (what PTX `[%r]` operands expect).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The block's dynamic shared memory as a T placed on a 1024-byte boundary (128B-swizzled TMA boxes and matrix
// descriptors assume it). Launch with sizeof(T) + 1024 bytes of dynamic shared memory.
extern __shared__ uint8_t dynamic_smem[];
template <typename T>
__device__ __forceinline__ T& dynamic_smem_1024() {
  return *reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(dynamic_smem) + 1023) & ~uintptr_t{1023});
}

// Warpgroup (4 warps, 128 threads) index of this thread, made warp-uniform with a shuffle so that the compiler
// keeps branches on it uniform (wgmma and setmaxnreg must be executed by whole warps).
__device__ __forceinline__ int warpgroup_index() { return __shfl_sync(0xFFFFFFFFu, threadIdx.x / 128, 0); }

// True in exactly one active lane of the warp (the lowest); all 32 lanes must execute it.
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

// A row of an mma/wgmma accumulator fragment is spread over the 4 lanes of a quad (lanes 4i..4i+3):
// these reduce over the quad and give every lane of it the result.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xFFFFFFFFu, x, 1);
  return x + __shfl_xor_sync(0xFFFFFFFFu, x, 2);
}

// 2^x with the SFU (ex2.approx.ftz.f32): about 2 ulp, -inf -> +0. Softmax in base 2 folds log2(e) into the scale.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Two floats -> one b32 register of bf16x2 (round to nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// 16-byte store to shared memory at a shared-window address (a generic pointer store may compile to a slower
// generic ST when the compiler cannot prove the pointer is shared).
__device__ __forceinline__ void st_shared_v4(uint32_t address, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// Named barriers 1..15 (0 is __syncthreads): synchronise a subset of the block, e.g. one warpgroup.
// `threads` counts every thread taking part (a multiple of 32). sync waits; arrive signals without waiting.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Registers written asynchronously (wgmma accumulators, tcgen05.ld results) are final only after the matching
// wait, which names no registers: after the wait, this empty asm "rewrites" them so the compiler cannot move their
// reads above it.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Order this thread's generic-proxy shared-memory accesses (ordinary st.shared) before later async-proxy
// accesses (TMA stores, wgmma or tcgen05.mma reading shared memory). Then synchronise the threads that wrote.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------- warp specialization
// Per-thread register budget of the whole warpgroup (all 128 threads execute it): dec in producers, inc in
// consumers. A multiple of 8 in [24, 256]; the kernel needs __launch_bounds__(threads, 1).
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---------------------------------------------------------------- clusters and distributed shared memory
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Every thread of every CTA in the cluster; release/acquire orders shared-memory accesses across the cluster.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The shared::cluster address of the same shared-memory offset in CTA `cta_rank` of this cluster.
__device__ __forceinline__ uint32_t map_to_cta(uint32_t local_smem_addr, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local_smem_addr), "r"(cta_rank));
  return remote;
}
// Read a 32-bit word from another CTA's shared memory (an address from map_to_cta).
__device__ __forceinline__ uint32_t ld_shared_cluster_u32(uint32_t cluster_addr) {
  uint32_t value;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(value) : "r"(cluster_addr) : "memory");
  return value;
}

}  // namespace ptx
