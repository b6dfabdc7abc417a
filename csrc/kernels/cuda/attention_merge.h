// The cascade's merge on the GPU (kernels/math/attention_merge_math.h), one launch
// for a step: one warp per (query row, head), its lanes over the head's
// elements. Torch-free (raw pointers and a stream) so that nvcc compiles it
// alone in CI.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/math/attention_merge_args.h"

namespace tq::cuda {

cudaError_t launch_attention_merge(const AttentionMergeArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
