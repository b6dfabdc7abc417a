// y = x w^T on few rows by the tensor cores, K in order (kernels/math/few_rows_mma_math.h). Torch-free (raw pointers
// and a stream) so that nvcc compiles it alone in CI.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/math/few_rows_mma_math.h"

namespace tq::cuda {

// With tiling few_rows_mma::kTilings[tiling]. cudaErrorInvalidValue where the arguments do not fit it (few_rows_mma::fits,
// 16-byte aligned arrays) or there is no such tiling.
cudaError_t launch_few_rows_mma(const few_rows_mma::Args& args, int tiling, cudaStream_t stream);

}  // namespace tq::cuda
