// The arithmetic of one row of the row-wise kernels (rowwise.h), without
// torch: what rowwise.cpp runs per row, and what test/native/rowwise_check.cpp
// checks for the same bits wherever the row and its output lie.
#pragma once
#include <cstdint>

namespace tq {

// y = x / sqrt(mean(x^2) + eps) * w, over n values.
void rms_norm_row(const float* x, const float* w, float eps, int64_t n, float* y);

// y = (x - mean) / sqrt(var + eps) * w + b, over n values; the sums as
// rms_norm_row's (16 lanes, the tail, the lanes in order).
void layer_norm_row(const float* x, const float* w, const float* b, float eps, int64_t n, float* y);

// Rotate-half RoPE of one head's n values (n even): cos and sin are the
// position's table rows.
void rope_row(const float* x, const float* cos, const float* sin, int64_t n, float* y);

}  // namespace tq
