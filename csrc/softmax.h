// Softmax of one row of fp32 attention scores, with a vectorized exp
// (vec_exp.h): this libtorch's softmax runs a scalar exp and was about a
// quarter of a bf16 prefill. The additive mask is applied in the same pass,
// and the final division is left to the caller: attention scales its output
// rows ([queries, dim]) instead of the probabilities ([queries, keys]), which
// saves a pass over the scores. Entries at -inf (masked keys) come out 0.
#pragma once
#include <cstdint>

namespace tq {

// x[0, n): scores, overwritten. bias: the mask for x[bias_from, n) (0 or -inf),
// or null. Writes the numerators exp(x - max) to out_f32 (may be x) or, if
// non-null, out_bf16, and returns 1 / their sum: the probabilities are the
// numerators times it (0 for a row with nothing visible).
float softmax_numerators(float* x, int64_t n, const float* bias, int64_t bias_from, float* out_f32, uint16_t* out_bf16);

}  // namespace tq
