// Softmax of one row of fp32 attention scores, with a vectorized exp
// (vec_exp.h): this libtorch's softmax runs a scalar exp and was about a
// quarter of a bf16 prefill. The additive mask is applied in the same pass,
// and the final division is left to the caller: attention scales its output
// rows ([queries, dim]) instead of the probabilities ([queries, keys]), which
// saves a pass over the scores. Entries at -inf (masked keys) come out 0.
#pragma once
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace tq {

// x[0, n): scores. Computes the numerators exp(v - max) of v = x * scale plus
// the mask (bias: 0 or -inf for x[bias_from, n), or null), in bf16 to
// out_bf16 when it is not null, else in place (x then holds the numerators;
// with out_bf16, the masked scaled scores). Returns 1 / their sum, taken
// exactly in fixed point (softmax.cpp): a row's sum does not change with the
// place of its terms or the zeros (masked keys) among them. A row with nothing
// visible comes out all 0, its inverse sum 0. isa: AVX-512 vectors at the
// AVX-512 levels (only where the CPU has them), with vcvtneps2bf16 at
// avx512-bf16; else generic loops.
float softmax_numerators(float* x, int64_t n, float scale, const float* bias, int64_t bias_from, uint16_t* out_bf16, Isa isa);

}  // namespace tq
