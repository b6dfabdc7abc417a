// The few-row GEMM's launch: a block per 16 output columns (few_rows_mma.cuh says how it computes).
#include "kernels/cuda/few_rows_mma.h"
#include "kernels/cuda/few_rows_mma.cuh"

namespace tq::cuda {

cudaError_t launch_few_rows_mma(const few_rows_mma::Args& args, cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!few_rows_mma::fits(args) || !aligned(args.x) || !aligned(args.w) || !aligned(args.y)) return cudaErrorInvalidValue;
  few_rows_mma_kernel<<<args.n / few_rows_mma::kBlockCols, few_rows_mma::kWarps * 32, few_rows_mma::kSharedBytes, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
