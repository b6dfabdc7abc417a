// The arguments of the cascade's merge kernel (kernels/cuda/attention_merge.h launches it; its body,
// attention_merge.cuh, runs on the host in the CPU checks too). Plain pointers, no CUDA or torch types.
#pragma once
#include <cstdint>

#include "kernels/math/attention_merge_math.h"

namespace tq::cuda {

// The tiers' results where they lie (merge::source_of): a merge entry names a row of them counted tier after tier.
struct AttentionMergeArgs {
  int rows, heads, dim;
  const int32_t* merge_begin;  // [rows + 1] (batch/cascade_plan.h)
  const int32_t* merge_entry;  // per entry: its row in the tiers' rows counted in order
  int sources;                 // at most merge::kMaxSources
  const void* partial[merge::kMaxSources];  // each [its rows, heads, dim], fp32 or bf16 (partial_bf16)
  const float* lse[merge::kMaxSources];     // each [heads, its rows]
  int start[merge::kMaxSources + 1];        // each source's first row in the count; start[sources]: the total
  bool partial_bf16, out_bf16;
  void* out;                   // [rows, heads, dim], fp32 or bf16 (out_bf16)
  // out is partial[0], whose rows are the output's in order: a row whose one entry is its own row there is left as it is.
  bool in_place_first;
  // In place, the rows to write where listed (nullptr: every row): `written` of them, -1 for none.
  const int32_t* merge_written;
  int written;
};

}  // namespace tq::cuda
