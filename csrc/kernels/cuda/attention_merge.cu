// One warp per (query row, head): every lane computes the row's weights from
// its entries' log-sum-exps (at most kMaxEntries, in registers), then merges
// the elements lane, lane + 32, ... Same functions, same order as the CPU merge,
// each entry read in its tier's own result (no copy of them into one array first).
// In place over the first source (in_place_first), a lane reads each element it
// writes before writing it, and a warp reads no other row of that source than its own.
#include "kernels/cuda/attention_merge.h"
#include "kernels/cuda/attention_merge.cuh"

namespace tq::cuda {
namespace {

template <typename In>
void launch_for(const AttentionMergeArgs& a, dim3 grid, dim3 block, cudaStream_t stream) {
  if (a.out_bf16) attention_merge_kernel<In, uint16_t><<<grid, block, 0, stream>>>(a);
  else attention_merge_kernel<In, float><<<grid, block, 0, stream>>>(a);
}

}  // namespace

cudaError_t launch_attention_merge(const AttentionMergeArgs& args, cudaStream_t stream) {
  if (attention_merge_items(args) == 0) return cudaSuccess;
  const dim3 grid = attention_merge_grid(args), block = attention_merge_block();
  if (args.partial_bf16) launch_for<uint16_t>(args, grid, block, stream);
  else launch_for<float>(args, grid, block, stream);
  return cudaGetLastError();
}

}  // namespace tq::cuda
