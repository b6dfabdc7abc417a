// One warp per (query row, head): every lane computes the row's weights from
// its entries' log-sum-exps (at most kMaxEntries, in registers), then merges
// the elements lane, lane + 32, ... Same functions, same order as the CPU merge,
// each entry read in its tier's own result (no copy of them into one array first).
// In place over the first source (in_place_first), a lane reads each element it
// writes before writing it, and a warp reads no other row of that source than its own.
#include "kernels/math/attention_merge_math.h"
#include "kernels/cuda/attention_merge.h"

namespace tq::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kLanes = 32;
constexpr int kHeld = 4;  // a lane's elements of a head loaded ahead: head dims up to 128

template <typename In, typename Out>
__global__ void attention_merge_kernel(AttentionMergeArgs a) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kLanes;
  if (item >= static_cast<int64_t>(a.rows) * a.heads) return;
  const int lane = threadIdx.x % kLanes;
  const int row = static_cast<int>(item / a.heads), head = static_cast<int>(item % a.heads);
  const int first = a.merge_begin[row], n = a.merge_begin[row + 1] - first;
  if (a.in_place_first && n == 1 && a.merge_entry[first] == row) return;  // its value is the merged one, where it lies
  float lse[merge::kMaxEntries], weight[merge::kMaxEntries];
  const In* base[merge::kMaxEntries];
  for (int e = 0; e < n; ++e) {
    const int r = a.merge_entry[first + e], s = merge::source_of(a.start, a.sources, r), local = r - a.start[s];
    lse[e] = a.lse[s][static_cast<int64_t>(head) * (a.start[s + 1] - a.start[s]) + local];
    base[e] = static_cast<const In*>(a.partial[s]) + (static_cast<int64_t>(local) * a.heads + head) * a.dim;
  }
  // Heads of up to kHeld * 32 values: the lane's elements of every entry are loaded (widened exactly) before the
  // weights are formed, in one round trip with the log-sum-exps, where the loop below waits out each element's loads
  // after the last one's store (in place, the compiler cannot move them past it). In place, every element is read
  // before any is written. Loops of fixed length, so the values stay in registers; merged() is merged_values() of the
  // widened values, so the same bits.
  const bool ahead = a.dim <= kHeld * kLanes;
  float held[kHeld][merge::kMaxEntries];
  if (ahead) {
#pragma unroll
    for (int k = 0; k < kHeld; ++k)
#pragma unroll
      for (int e = 0; e < merge::kMaxEntries; ++e)
        if (e < n && lane + k * kLanes < a.dim) held[k][e] = exact::widen(base[e][lane + k * kLanes]);
  }
  const float total = merge::weights(lse, n, weight);
  Out* out = static_cast<Out*>(a.out) + (static_cast<int64_t>(row) * a.heads + head) * a.dim;
  if (ahead) {
#pragma unroll
    for (int k = 0; k < kHeld; ++k)
      if (lane + k * kLanes < a.dim) exact::store(merge::merged_values(weight, held[k], n, total), out + lane + k * kLanes);
    return;
  }
  const In* value[merge::kMaxEntries];
  for (int d = lane; d < a.dim; d += kLanes) {
    for (int e = 0; e < n; ++e) value[e] = base[e] + d;
    exact::store(merge::merged(weight, value, n, total), out + d);
  }
}

template <typename In>
void launch_for(const AttentionMergeArgs& a, dim3 grid, dim3 block, cudaStream_t stream) {
  if (a.out_bf16) attention_merge_kernel<In, uint16_t><<<grid, block, 0, stream>>>(a);
  else attention_merge_kernel<In, float><<<grid, block, 0, stream>>>(a);
}

}  // namespace

cudaError_t launch_attention_merge(const AttentionMergeArgs& args, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(args.rows) * args.heads;
  if (items == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((items + kWarps - 1) / kWarps)), block(kWarps * kLanes);
  if (args.partial_bf16) launch_for<uint16_t>(args, grid, block, stream);
  else launch_for<float>(args, grid, block, stream);
  return cudaGetLastError();
}

}  // namespace tq::cuda
