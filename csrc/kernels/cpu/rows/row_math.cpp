// No fused multiply-add contraction in this file (as in softmax.cpp). GCC
// contracts x * c - y * s to one FMA in some of a loop's versions and not in
// others (its 8-wide vector epilogue keeps the multiply and the subtract),
// and which version a row takes depends on how far its output lies from its
// input (the vectorizer's run-time alias check). Measured on an AVX-512 CPU:
// RoPE of a 16-value head gave other bits at 138 of 146 output placements
// (test/native/rowwise_check.cpp), and so tiny-llama's last-layer query, and
// its label logits, changed with the heap's layout; with contraction off, at
// none.
#pragma GCC optimize("fp-contract=off")
#include "kernels/cpu/rows/row_math.h"

#include <cmath>

namespace tq {

namespace {

// The sum of f(x[j]) over n values in sixteen partial sums (lane l: j = l, l + 16, ... over the whole
// 16-blocks), then the tail, then the lanes in order: the reduction vectorizes without reassociation flags.
template <class F>
inline float lane_sum(const float* x, int64_t n, F f) {
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += f(x[j + l]);
  float sum = 0;
  for (; j < n; ++j) sum += f(x[j]);
  for (int l = 0; l < kLanes; ++l) sum += part[l];
  return sum;
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void rms_norm_row(const float* x, const float* w, float eps, int64_t n, float* y) {
  const float sum = lane_sum(x, n, [](float v) { return v * v; });
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale * w[j];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void layer_norm_row(const float* x, const float* w, const float* b, float eps,
                                                                               int64_t n, float* y) {
  const float mean = lane_sum(x, n, [](float v) { return v; }) / static_cast<float>(n);
  const float var = lane_sum(x, n, [mean](float v) { return (v - mean) * (v - mean); }) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(var + eps);
  for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * scale * w[j] + b[j];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void rope_row(const float* x, const float* cos, const float* sin, int64_t n, float* y) {
  const int64_t half = n / 2;
  for (int64_t j = 0; j < half; ++j) y[j] = x[j] * cos[j] - x[j + half] * sin[j];
  for (int64_t j = half; j < n; ++j) y[j] = x[j] * cos[j] + x[j - half] * sin[j];
}

}  // namespace tq
