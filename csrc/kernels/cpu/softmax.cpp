// No fused multiply-add contraction in this file: GCC contracts a * b + c in
// a vectorized loop but computes its scalar tail as written, so an element's
// exp (and so a softmax numerator or a SiLU) would change with its place in
// the array, that is with the keys or rows around it. Measured: the portable
// softmax of one row of 37 scores gave other bits at 23 of 40 offsets; with
// contraction off, at none (test/native/softmax_check.cpp).
#pragma GCC optimize("fp-contract=off")
#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/vec_exp.h"

namespace tq {
namespace {

constexpr int kLanes = 16;  // partial maxima, so the reduction vectorizes (a max is exact in any order)

// In place (the caller stores the numerators): the loops vectorize for any target.
__attribute__((target_clones("avx512f", "avx2", "default"))) void numerators_portable(float* x, int64_t n, const float* bias, int64_t bias_from) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (bias)
    for (int64_t i = bias_from; i < n; ++i) x[i] += bias[i - bias_from];
  float part[kLanes];
  std::fill(part, part + kLanes, kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] = std::max(part[l], x[i + l]);
  float max = kNegInf;
  for (int l = 0; l < kLanes; ++l) max = std::max(max, part[l]);
  for (; i < n; ++i) max = std::max(max, x[i]);
  if (max == kNegInf) {  // nothing visible: no such row in the engine, but stay finite
    std::fill(x, x + n, 0.0f);
    return;
  }
  float shifted[kExpBlock], e[kExpBlock];
  for (int64_t a = 0; a < n; a += kExpBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kExpBlock, n - a));
    for (int j = 0; j < m; ++j) shifted[j] = x[a + j] - max;
    exp_block(shifted, e, m);
    for (int j = 0; j < m; ++j) x[a + j] = x[a + j] == kNegInf ? 0.0f : e[j];
  }
}

#if defined(__x86_64__)
// One row: the mask added, max, then exp, with the numerators written in
// place and in bf16 (when asked) in the same pass.
TQ_AVX512 void numerators_avx512(float* x, int64_t n, const float* bias, int64_t bias_from, uint16_t* out_bf16) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  if (bias)
    for (int64_t i = bias_from; i < n; i += 16) {
      const __mmask16 m = lanes_from(i, n);
      _mm512_mask_storeu_ps(x + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, bias + (i - bias_from))));
    }
  __m512 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, lanes_from(i, n), x + i));
  const float max = _mm512_reduce_max_ps(vmax);
  if (max != -std::numeric_limits<float>::infinity()) {  // else nothing is visible: no such row in the engine, but stay finite
    const __m512 shift = _mm512_set1_ps(max);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = lanes_from(i, n);
      const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
      const __mmask16 live = _mm512_mask_cmp_ps_mask(m, v, neg_inf, _CMP_NEQ_OQ);
      const __m512 e = _mm512_maskz_mov_ps(live, exp16(_mm512_sub_ps(v, shift)));
      if (out_bf16) store_bf16(out_bf16 + i, e, m);
      _mm512_mask_storeu_ps(x + i, m, e);
    }
  } else {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = lanes_from(i, n);
      if (out_bf16) store_bf16(out_bf16 + i, _mm512_setzero_ps(), m);
      _mm512_mask_storeu_ps(x + i, m, _mm512_setzero_ps());
    }
  }
}
#endif

}  // namespace

void softmax_numerators(float* x, int64_t n, const float* bias, int64_t bias_from, uint16_t* out_bf16, bool avx512) {
#if defined(__x86_64__)
  if (avx512) return numerators_avx512(x, n, bias, bias_from, out_bf16);
#endif
  numerators_portable(x, n, bias, bias_from);
  if (out_bf16) store_scaled(x, 1.0f, n, out_bf16);
}

void inverse_row_sums(const float* p, int64_t rows, int64_t n, float* inv) {
  // Eight rows at a time: eight independent chains, not one, so the adds overlap.
  constexpr int64_t kRows = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t m = std::min(kRows, rows - r0);
    float sum[kRows] = {};
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r < m; ++r) sum[r] += p[(r0 + r) * n + j];
    for (int64_t r = 0; r < m; ++r) inv[r0 + r] = sum[r] > 0 ? 1.0f / sum[r] : 0.0f;
  }
}

}  // namespace tq
