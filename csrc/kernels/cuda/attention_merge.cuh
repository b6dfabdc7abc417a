// The cascade's merge kernel's body and launch shape (attention_merge.cu launches it; its head says how it works),
// apart from the launch so that a host compiler builds it too: the CPU checks run this body through
// host_emulation.h (test/native/cuda_bodies_check.cpp). One translation unit of a program includes this.
#pragma once
#include <cstdint>

#include "kernels/cuda/host_emulation.h"
#include "kernels/math/attention_merge_args.h"

namespace tq::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kLanes = 32;
constexpr int kHeld = 4;  // a lane's elements of a head loaded ahead: head dims up to 128

// The launch's warps: one per (row, head), of the listed rows where they are (in place, the rows it writes).
TQ_HOST_DEVICE inline int64_t attention_merge_items(const AttentionMergeArgs& a) {
  return static_cast<int64_t>(a.merge_written ? a.written : a.rows) * a.heads;
}

template <typename In, typename Out>
__global__ void attention_merge_kernel(AttentionMergeArgs a) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kLanes;
  if (item >= attention_merge_items(a)) return;
  const int lane = threadIdx.x % kLanes;
  const int slot = static_cast<int>(item / a.heads), head = static_cast<int>(item % a.heads);
  const int row = a.merge_written ? a.merge_written[slot] : slot;
  if (row < 0) return;
  const int first = a.merge_begin[row], n = a.merge_begin[row + 1] - first;
  if (a.in_place_first && n == 1 && a.merge_entry[first] == row) return;  // its value is the merged one, where it lies
  // Loops of fixed length over the entries (guarded by n), here and below: the arrays stay in registers (a loop of n
  // puts them on the stack), and a loop's loads are issued together, the entries' rows first, then every log-sum-exp
  // and value, where a loop of n waited out each entry's row, then its log-sum-exp, in turn.
  float lse[merge::kMaxEntries], weight[merge::kMaxEntries];
  const In* base[merge::kMaxEntries];
  int entry[merge::kMaxEntries];
#pragma unroll
  for (int e = 0; e < merge::kMaxEntries; ++e)
    if (e < n) entry[e] = a.merge_entry[first + e];
#pragma unroll
  for (int e = 0; e < merge::kMaxEntries; ++e) {
    if (e >= n) break;
    const int r = entry[e], s = merge::source_of(a.start, a.sources, r), local = r - a.start[s];
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
#pragma unroll
    for (int e = 0; e < merge::kMaxEntries; ++e)
      if (e < n) value[e] = base[e] + d;
    exact::store(merge::merged(weight, value, n, total), out + d);
  }
}

// The launch's grid and blocks: a warp per item.
dim3 attention_merge_grid(const AttentionMergeArgs& a) {
  const int64_t items = attention_merge_items(a);
  return dim3(static_cast<unsigned>((items + kWarps - 1) / kWarps));
}
dim3 attention_merge_block() { return dim3(kWarps * kLanes); }

}  // namespace
}  // namespace tq::cuda
