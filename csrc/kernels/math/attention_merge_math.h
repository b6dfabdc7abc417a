// The cascade's merge (batch/cascade_plan.h), defined once for the CPU
// (kernels/cascade/attention_merge.cpp) and the CUDA kernel
// (kernels/cuda/attention_merge.cu): a query row's partial attention results,
// one per tier it is in, each an output o_e and the log-sum-exp L_e of its
// scores, combine into softmax attention over the union of their keys:
//   out = sum_e w_e o_e / sum_e w_e,  w_e = exp(L_e - max_e L_e),
// every operation rounded on its own, in entry (tier) order. A row in one
// tier gets w = 1 and its output's bits unchanged. Only entries that see a key
// are ever merged (the plan leaves the others out), so a kernel's value for an
// empty row (FlashAttention-2's +inf, the memory-efficient kernel's 0) is never read.
// A row with no entries at all merges to 0 without reading anything.
#pragma once
#include "kernels/math/host_device_math.h"

namespace tq::merge {

// Tiers a row is in at most (own, state, and windowed state tiers); the kernel keeps a row's weights in registers.
constexpr int kMaxEntries = 8;

// The tiers' results read where each tier's kernel wrote them, not copied into one array first: an entry names
// row r of the tiers' rows counted tier after tier, which is row r - start[t] of tier t, the last t with
// start[t] <= r. A step of more tiers than this has them stacked into one source first.
constexpr int kMaxSources = 16;
TQ_HOST_DEVICE inline int source_of(const int* start, int sources, int r) {
  int t = 0;
  while (t + 1 < sources && start[t + 1] <= r) ++t;
  return t;
}

// weight[e] = exp(lse[e] - max lse) for n (at most kMaxEntries) entries; returns their sum. Loops of fixed length, as
// merged_values's: a kernel's lse and weight arrays stay in registers.
TQ_HOST_DEVICE inline float weights(const float* lse, int n, float* weight) {
  if (n <= 0) return 0.0f;
  float top = lse[0];
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int e = 1; e < kMaxEntries; ++e)
    if (e < n) top = fmaxf(top, lse[e]);
  float total = 0.0f;
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int e = 0; e < kMaxEntries; ++e)
    if (e < n) {
      weight[e] = expf(exact::add(lse[e], -top));
      total = exact::add(total, weight[e]);
    }
  return total;
}

// One element of the merged output from its entries' values, widened already: sum_e weight[e] * values[e] / total
// over the first n of kMaxEntries. The loop has a fixed length, so that a kernel that holds the values keeps them in
// registers (the CUDA merge loads a lane's elements ahead of its stores).
TQ_HOST_DEVICE inline float merged_values(const float* weight, const float* values, int n, float total) {
  if (n <= 0) return 0.0f;
  if (n == 1) return values[0];
  float acc = 0.0f;
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int e = 0; e < kMaxEntries; ++e)
    if (e < n) acc = exact::add(acc, exact::mul(weight[e], values[e]));
  return exact::div(acc, total);
}

// One element of the merged output: sum_e weight[e] * value[e] / total, with value[e] the
// element of entry e's output (fp32, or bf16 bits).
template <typename T>
TQ_HOST_DEVICE inline float merged(const float* weight, const T* const* value, int n, float total) {
  float values[kMaxEntries] = {};
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int e = 0; e < kMaxEntries; ++e)
    if (e < n) values[e] = exact::widen(*value[e]);
  return merged_values(weight, values, n, total);
}

}  // namespace tq::merge
