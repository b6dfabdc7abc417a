// RoPE's cos and sin tables, computed once in float64 from a RopeConfig (model_config.h) the way
// transformers' rope_type computes its inverse frequencies, then stored in fp32 on the device. The
// powers, cosines and sines are common/fixed_math.h's, so the tables are the same bits on every CPU.
// The transformer looks a token's row up by index, so one table serves any batch.
#pragma once
#include <ATen/ATen.h>

#include <utility>

#include "model/model_config.h"

namespace tq {

struct RotaryTables {
  // [rows, rotary_dim] fp32, in the rotate-half layout (both halves share a frequency). Rows
  // [0, max_positions) are the positions; with longrope, rows [long_offset, long_offset +
  // max_positions) are the same positions under the long factors (long_offset 0: none).
  at::Tensor cos, sin;
  int64_t long_offset = 0;
};

// 1 / theta^(i / dim) for i = 0, 2, ..., dim - 2: [dim / 2] float64.
at::Tensor inverse_powers(double theta, int64_t dim);
// The cosines and sines of a float64 tensor's values, elementwise (float64).
std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& angles);

// Inverse frequencies [rotary_dim / 2] float64; `long_factors` picks longrope's long factors.
at::Tensor inverse_frequencies(const RopeConfig& rope, int64_t rotary_dim, bool long_factors = false);

RotaryTables rotary_tables(const RopeConfig& rope, int64_t rotary_dim, int64_t max_positions, at::Device device);

}  // namespace tq
