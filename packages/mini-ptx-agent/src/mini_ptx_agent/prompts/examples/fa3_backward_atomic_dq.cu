// Pattern: FlashAttention-3-style backward, dQ by atomics (sm_90a). For mha_bwd_d64; the preprocess kernel and the
// key-block kernel are in fa3_backward_common.cuh. Kernels: preprocess (delta) -> kv_block_kernel<true> -> convert.
// Each key-block CTA also computes its share of dQ for every query block, dS K (dS^T written to shared memory and
// read MN-major by wgmma), and adds it into an fp32 buffer with atomics; a last kernel converts it to bf16.
// One pass over Q and dO, at the price of B*H*S*64 fp32 atomics per key block (a TMA reduce-add,
// cp.reduce.async.bulk.tensor, would batch them per tile).
#include "fa3_backward_common.cuh"

namespace {

__global__ void convert_dq_kernel(const float* __restrict__ acc, __nv_bfloat16* __restrict__ dq, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dq[i] = __float2bfloat16(acc[i]);
  }
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView o,
         tvm::ffi::TensorView lse, tvm::ffi::TensorView dout, tvm::ffi::TensorView dq, tvm::ffi::TensorView dk,
         tvm::ffi::TensorView dv) {
  const fa3bwd::Prepared p = fa3bwd::prepare(q, k, v, o, lse, dout, dq, dk, dv);
  if (p.delta == nullptr) return;
  const int64_t elements = p.bh * p.seq_len * fa3bwd::kHeadDim;
  float* dq_acc = nullptr;
  TVM_FFI_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&dq_acc), elements * sizeof(float), p.stream) == cudaSuccess,
                RuntimeError)
      << "cannot allocate the dq accumulator";
  cudaMemsetAsync(dq_acc, 0, elements * sizeof(float), p.stream);
  fa3bwd::launch_kv_blocks<true>(p, static_cast<const float*>(lse.data_ptr()), dk, dv, dq_acc);
  convert_dq_kernel<<<132 * 8, 256, 0, p.stream>>>(dq_acc, static_cast<__nv_bfloat16*>(dq.data_ptr()), elements);
  cudaFreeAsync(dq_acc, p.stream);
  fa3bwd::finish(p);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
