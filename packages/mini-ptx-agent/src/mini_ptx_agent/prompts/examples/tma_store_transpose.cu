// Pattern: TMA store. y = x^T for a bf16 matrix x[M, N] (output y[N, M]); M and N multiples of 8.
// Each CTA moves one 64 x 64 tile: TMA load into shared memory (completion on an mbarrier), transpose through
// shared memory with ordinary loads and stores (generic proxy), fence.proxy.async, then one thread stores the
// tile with TMA. TMA zero-fills loads past the edges and clips stores at the edges, so ragged M, N need no code.
#include <cuda_bf16.h>
#include <tvm/ffi/function.h>

#include "host_checks.cuh"
#include "ptx_mbarrier.cuh"
#include "ptx_simt.cuh"
#include "ptx_tma.cuh"

namespace {

constexpr int kTile = 64;  // 64 bf16 = 128 bytes: one row of a box without swizzle
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) transpose_kernel(const __grid_constant__ CUtensorMap map_x,
                                                             const __grid_constant__ CUtensorMap map_y) {
  __shared__ alignas(128) __nv_bfloat16 in[kTile][kTile];   // rows of x
  __shared__ alignas(128) __nv_bfloat16 out[kTile][kTile];  // rows of y
  __shared__ alignas(8) uint64_t loaded;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;  // tile origin in x

  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&map_x);
    ptx::mbar_init(&loaded, 1);
    ptx::fence_barrier_init();  // make the init visible to the TMA unit (the async proxy)
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbar_arrive_expect_tx(&loaded, sizeof(in));  // the whole box, even where it hangs over the edge
    ptx::tma_load_2d(in, &map_x, &loaded, col0, row0);
  }
  ptx::mbar_wait_parity(&loaded, 0);  // TMA data observed through the barrier is visible to ordinary loads

  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int r = i / kTile, c = i % kTile;
    out[c][r] = in[r][c];
  }
  ptx::fence_proxy_async_smem();  // each writer orders its generic stores before the async-proxy read ...
  __syncthreads();                // ... and the barrier orders every writer before the storing thread
  if (threadIdx.x == 0) {
    ptx::tma_store_2d(&map_y, out, row0, col0);  // y's tile origin: column row0, row col0
    ptx::tma_store_commit();
    ptx::tma_store_wait_read<0>();  // `out` must stay valid until TMA has read it
  }
}

}  // namespace

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  host::check_bf16_matrix(x, "x");
  host::check_bf16_matrix(y, "y");
  const int64_t m = x.size(0), n = x.size(1);
  TVM_FFI_CHECK(y.size(0) == n && y.size(1) == m, ValueError) << "y must be [N, M] for x [M, N]";
  if (m == 0 || n == 0) return;
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  transpose_kernel<<<grid, kThreads, 0, host::stream_of(x)>>>(host::matrix_map(x, kTile, kTile, CU_TENSOR_MAP_SWIZZLE_NONE),
                                                              host::matrix_map(y, kTile, kTile, CU_TENSOR_MAP_SWIZZLE_NONE));
  host::check_launch("transpose");
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
