// The few-row GEMM's launch: a block per tile of its tiling (few_rows_mma.cuh says how it computes).
#include "kernels/cuda/few_rows_mma.h"
#include "kernels/cuda/few_rows_mma.cuh"

namespace tq::cuda {

cudaError_t launch_few_rows_mma(const few_rows_mma::Args& args, int tiling, cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (tiling < 0 || tiling >= few_rows_mma::kTilingCount || !few_rows_mma::fits(args, few_rows_mma::kTilings[tiling]) || !aligned(args.x) ||
      !aligned(args.w) || !aligned(args.y))
    return cudaErrorInvalidValue;
  with_tiling(tiling, args, [&](auto kernel, dim3 grid, dim3 block, size_t shared_bytes) { kernel<<<grid, block, shared_bytes, stream>>>(args); });
  return cudaGetLastError();
}

}  // namespace tq::cuda
