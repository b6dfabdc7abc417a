// Softmax of one row of fp32 attention scores, with a vectorized exp
// (vec_exp.h): this libtorch's softmax runs a scalar exp and was about a
// quarter of a bf16 prefill. The additive mask is applied in the same pass,
// and the final division is left to the caller: attention scales its output
// rows ([queries, dim]) instead of the probabilities ([queries, keys]), which
// saves a pass over the scores. Entries at -inf (masked keys) come out 0.
#pragma once
#include <cstdint>

namespace tq {

// x[0, n): scores, overwritten by the numerators exp(x - max), also written
// in bf16 to out_bf16 when it is not null. bias: the mask for x[bias_from, n)
// (0 or -inf), or null. A row with nothing visible comes out all 0. avx512:
// with AVX-512 vectors (only where the CPU has them), else portable loops.
void softmax_numerators(float* x, int64_t n, const float* bias, int64_t bias_from, uint16_t* out_bf16, bool avx512);

// inv[r] = 1 / sum of p[r * n, r * n + n) (0 for a zero sum), each sum taken
// in index order, one term after another: so a row's sum does not change when
// zeros (masked keys) come between its terms or before them, which a sum in
// vector lanes would (a term's lane depends on its index).
void inverse_row_sums(const float* p, int64_t rows, int64_t n, float* inv);

}  // namespace tq
