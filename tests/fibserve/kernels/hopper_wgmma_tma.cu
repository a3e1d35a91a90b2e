// Analysis fixture: one Hopper warpgroup loads a 64x16 A tile and a 64x16 B tile with TMA
// (cp.async.bulk.tensor through a __grid_constant__ CUtensorMap), waits on an mbarrier with expect-tx,
// and multiplies them with wgmma.mma_async m64n64k16 (bf16 in, fp32 accumulate). It is written to compile
// for sm_90a and to keep HGMMA/UTMALDG/SYNCS in the SASS (inline asm volatile, results stored to global);
// its numerics are not the point (no swizzle, simple descriptors).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

namespace {

constexpr int kM = 64, kN = 64, kK = 16;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint64_t make_desc(const void* smem) {
  // Matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address >> 4 in bits 0-13, leading byte
  // offset >> 4 in bits 16-29, stride byte offset >> 4 in bits 32-45, no swizzle.
  uint64_t addr = (smem_addr(smem) & 0x3FFFF) >> 4;
  uint64_t lead = (128 >> 4), stride = (256 >> 4);
  return addr | (lead << 16) | (stride << 32);
}

__global__ void __launch_bounds__(128) wgmma_tma_kernel(const __grid_constant__ CUtensorMap tmap_a,
                                                        const __grid_constant__ CUtensorMap tmap_b,
                                                        float* __restrict__ out) {
  __shared__ alignas(128) __nv_bfloat16 tile_a[kM * kK];
  __shared__ alignas(128) __nv_bfloat16 tile_b[kN * kK];
  __shared__ alignas(8) uint64_t bar;

  const uint32_t bar_addr = smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar_addr), "r"(1));
    asm volatile("fence.proxy.async.shared::cta;");
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    const uint32_t bytes = (kM + kN) * kK * sizeof(__nv_bfloat16);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(bytes));
    const int row = blockIdx.x * kM;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(smem_addr(tile_a)), "l"(reinterpret_cast<uint64_t>(&tmap_a)), "r"(0), "r"(row), "r"(bar_addr)
        : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(smem_addr(tile_b)), "l"(reinterpret_cast<uint64_t>(&tmap_b)), "r"(0), "r"(0), "r"(bar_addr)
        : "memory");
  }

  // Wait for phase 0 of the barrier: both TMA loads have landed.
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_LOOP;\n"
      "}\n" ::"r"(bar_addr), "r"(0) : "memory");

  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
  const uint64_t desc_a = make_desc(tile_a);
  const uint64_t desc_b = make_desc(tile_b);

  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31])
      : "l"(desc_a), "l"(desc_b));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

  // Accumulator layout of m64nNk16 (PTX ISA "Register Fragments"): warp w owns rows 16w..16w+15.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.x * kM + warp * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int col = (i / 4) * 8 + (lane % 4) * 2 + (i % 2);
    const int row = row0 + ((i / 2) % 2) * 8;
    out[row * kN + col] = acc[i];
  }
}

CUtensorMap make_tensor_map(void* base, uint64_t rows, uint64_t cols, uint32_t box_rows, uint32_t box_cols) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status;
    cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  TVM_FFI_ICHECK(encode != nullptr) << "cuTensorMapEncodeTiled is not available";
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUresult result = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, elem_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_ICHECK(result == CUDA_SUCCESS) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(result);
  return map;
}

}  // namespace

// a: [M, 16] bfloat16, b: [64, 16] bfloat16 (B transposed, K-major), out: [M, 64] float32; M % 64 == 0.
void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView out) {
  const int64_t m = a.size(0);
  TVM_FFI_ICHECK(a.size(1) == kK && b.size(0) == kN && b.size(1) == kK && m % kM == 0)
      << "expected a [M, 16], b [64, 16] with M % 64 == 0";
  CUtensorMap map_a = make_tensor_map(a.data_ptr(), m, kK, kM, kK);
  CUtensorMap map_b = make_tensor_map(b.data_ptr(), kN, kK, kN, kK);
  cudaStream_t stream =
      static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  wgmma_tma_kernel<<<static_cast<unsigned>(m / kM), 128, 0, stream>>>(map_a, map_b,
                                                                       static_cast<float*>(out.data_ptr()));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
