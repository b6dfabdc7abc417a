// The cascade's merge on the GPU (kernels/math/attention_merge_math.h), one launch
// for a step: one warp per (query row, head), its lanes over the head's
// elements. Torch-free (raw pointers and a stream) so that nvcc compiles it
// alone in CI.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tq::cuda {

// The tiers' results stacked, tier after tier: a merge entry names its row there.
struct AttentionMergeArgs {
  int rows, heads, dim;
  const int32_t* merge_begin;  // [rows + 1] (batch/cascade_plan.h)
  const int32_t* merge_entry;  // per entry: its row in the stacked results
  const void* partial;         // [partial_rows, heads, dim], fp32 or bf16 (partial_bf16)
  const float* lse;            // [heads, partial_rows]
  int partial_rows;
  bool partial_bf16, out_bf16;
  void* out;                   // [rows, heads, dim], fp32 or bf16 (out_bf16)
};

cudaError_t launch_attention_merge(const AttentionMergeArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
