// Calls the sm_90a helpers that no prompt example uses, so that ptxas checks their inline PTX too.
// Compiled (never run) by tests/mini_ptx_agent/prompts/test_prompt_example_builds.py as a second translation
// unit of the scaled_add build: device code only, so it costs no tvm-ffi host compile.
#include "ptx_simt.cuh"

__global__ void __cluster_dims__(2, 1, 1) dsmem_smoke(uint32_t* out) {
  __shared__ alignas(16) uint32_t words[4];
  ptx::st_shared_v4(ptx::smem_addr(words), threadIdx.x, 1, 2, 3);
  ptx::cluster_sync();
  const uint32_t peer_words = ptx::map_to_cta(ptx::smem_addr(words), ptx::cluster_ctarank() ^ 1);
  out[blockIdx.x * blockDim.x + threadIdx.x] = ptx::ld_shared_cluster_u32(peer_words);
  ptx::cluster_sync();  // the peer reads our words until here
}
