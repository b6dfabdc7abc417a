// Softmax of one row of fp32 attention scores, with a vectorized exp
// (vec_exp.h): this libtorch's softmax runs a scalar exp and was about a
// quarter of a bf16 prefill. The additive mask is applied in the same pass
// and the probabilities are written in the model's dtype, so a row of scores
// is read from cache three times and never converted separately. Entries at
// -inf (masked keys) come out exactly 0.
#pragma once
#include <cstdint>

namespace tq {

// x[0, n): scores, overwritten. bias: the mask for x[bias_from, n) (0 or -inf),
// or null. Probabilities go to out_f32 (may be x) or, if non-null, out_bf16.
void softmax_row(float* x, int64_t n, const float* bias, int64_t bias_from, float* out_f32, uint16_t* out_bf16);

}  // namespace tq
