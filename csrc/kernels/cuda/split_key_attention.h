// The cascade's tiers read in place (kernels/math/split_key_math.h): a step's
// tiers of a layer in one launch, a block per (tier, sequence, key head, group
// of rows and query heads), one warp per (tier row, head), the keys and values
// of a tile read once per block into shared memory. Torch-free (raw pointers and a stream) so
// that nvcc compiles it alone in CI; its host twin is split_key::attend_row.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/math/split_key_math.h"

namespace tq::cuda {

cudaError_t launch_split_key_attention(const split_key::SplitKeyLaunch& launch, cudaStream_t stream);

}  // namespace tq::cuda
