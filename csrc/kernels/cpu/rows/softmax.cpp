// No fused multiply-add contraction in this file: GCC contracts a * b + c in
// a vectorized loop but computes its scalar tail as written, so an element's
// exp (and so a softmax numerator or a SiLU) would change with its place in
// the array, that is with the keys or rows around it. Measured: the generic
// softmax of one row of 37 scores gave other bits at 23 of 40 offsets; with
// contraction off, at none (test/native/softmax_check.cpp).
#pragma GCC optimize("fp-contract=off")
// Vector types are passed by value between helpers inlined into one function only (flatten below).
#pragma GCC diagnostic ignored "-Wpsabi"
#include "kernels/cpu/rows/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/rows/vec_exp.h"

namespace tq {
namespace {

constexpr int kLanes = 16;  // partial maxima, so the reduction vectorizes (a max is exact in any order)

// A row's sum in fixed point: each numerator (in [0, 1]) rounded to a multiple
// of 2^-27 (to nearest even, the default rounding of both the vector
// conversion and nearbyint) and the integers added. An integer sum is exact,
// so its order does not matter: a row's sum is the same whichever lanes its
// terms fall in, wherever its visible keys sit and however many masked keys
// (zeros) come between them, and the lanes need no sequential pass. Its error,
// at most 2^-28 a term, is n 2^-28 against the sequential fp32 sum's n 2^-24.
// The vector lanes add 32-bit integers (at most 2^27 a term) for 16 vectors,
// then widen into 64-bit sums: 64-bit adds for every vector cost a quarter of
// the softmax's time.
constexpr float kFixedOne = 134217728.0f;  // 2^27
constexpr int64_t kNarrowVectors = 16;     // 16 x 2^27 = 2^31: no 32-bit lane overflows
float inverse_of_fixed(uint64_t sum) { return sum > 0 ? static_cast<float>(static_cast<double>(kFixedOne) / static_cast<double>(sum)) : 0.0f; }

// In place (the caller stores the numerators): the loops vectorize for any target.
__attribute__((target_clones("avx512f", "avx2", "default"))) float numerators_generic(float* x, int64_t n, float scale, const float* bias,
                                                                                    int64_t bias_from) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
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
    return 0.0f;
  }
  float shifted[kExpBlock], e[kExpBlock];
  uint64_t sum = 0;
  for (int64_t a = 0; a < n; a += kExpBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kExpBlock, n - a));
    for (int j = 0; j < m; ++j) shifted[j] = x[a + j] - max;
    exp_block(shifted, e, m);
    for (int j = 0; j < m; ++j) x[a + j] = x[a + j] == kNegInf ? 0.0f : e[j];
    for (int j = 0; j < m; ++j) sum += static_cast<uint32_t>(std::nearbyint(x[a + j] * kFixedOne));
  }
  return inverse_of_fixed(sum);
}

#if defined(__x86_64__)
// Lanes of a row: a full vector (kFull) through plain loads and stores, a
// row's last, partial one through the mask (masked loads and stores on every
// vector were slower: bench/README.md, "CPU attention").
template <bool kFull>
TQ_AVX512 inline __m512 load_lanes(const float* p, __mmask16 m) {
  return kFull ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
template <bool kFull>
TQ_AVX512 inline void store_lanes(float* p, __mmask16 m, __m512 v) {
  if (kFull) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, m, v);
}
template <bool kFull>
TQ_AVX512 inline void store_lanes(uint16_t* p, __mmask16 m, __m256i v) {
  if (kFull) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  else _mm256_mask_storeu_epi16(p, m, v);
}

// Each vector of a row from `from` on through step(full, i, m), full a std::true_type for the full
// vectors and a std::false_type for the tail.
template <class Step>
TQ_AVX512 inline void each_vector(int64_t n, Step&& step, int64_t from = 0) {
  int64_t i = from;
  for (; i + 16 <= n; i += 16) step(std::true_type{}, i, static_cast<__mmask16>(0xffff));
  if (i < n) step(std::false_type{}, i, lanes_from(i, n));
}

// The numerators' full vectors taken this many at a time, their exps side by side
// (exp16_nonpositive<U>): one at a time, each exp's chain of dependent operations
// left the vector units idle (bench/README.md, "CPU attention").
constexpr int kExpGroup = 8;

// One row in two passes: scaled and masked, with its max; then exp, written
// in bf16 (when asked) or in place, and summed. ToBf16 is how a vector of
// numerators becomes bf16.
template <class ToBf16>
TQ_AVX512 inline float numerators_avx512(float* x, int64_t n, float scale, const float* bias, int64_t bias_from, uint16_t* out_bf16,
                                         ToBf16 to_bf16) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 factor = _mm512_set1_ps(scale);
  __m512 vmax = neg_inf;
  each_vector(n, [&](auto full, int64_t i, __mmask16 m) TQ_AVX512 {
    __m512 v = _mm512_mul_ps(load_lanes<full>(x + i, m), factor);
    if (bias && i + 16 > bias_from) {
      const __mmask16 biased = m & static_cast<__mmask16>(i >= bias_from ? 0xffff : 0xffff << (bias_from - i));
      v = _mm512_mask_add_ps(v, biased, v, _mm512_maskz_loadu_ps(biased, bias + (i - bias_from)));
    }
    store_lanes<full>(x + i, m, v);
    vmax = full ? _mm512_max_ps(vmax, v) : _mm512_mask_max_ps(vmax, m, vmax, v);
  });
  const float max = _mm512_reduce_max_ps(vmax);
  const bool any = max != -std::numeric_limits<float>::infinity();  // else nothing is visible: no such row in the engine, but stay finite
  const __m512 shift = _mm512_set1_ps(max), fixed_one = _mm512_set1_ps(kFixedOne);
  __m512i wide = _mm512_setzero_si512(), narrow = _mm512_setzero_si512();
  int64_t vectors = 0;
  const auto widen = [&] {
    wide = _mm512_add_epi64(wide, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(narrow)));
    wide = _mm512_add_epi64(wide, _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(narrow, 1)));
    narrow = _mm512_setzero_si512();
  };
  // A vector's numerators e (0 where masked), written and summed.
  const auto finish = [&](auto full, int64_t i, __mmask16 m, __m512 e) TQ_AVX512 {
    if (out_bf16) store_lanes<full>(out_bf16 + i, m, to_bf16(e));
    else store_lanes<full>(x + i, m, e);
    narrow = _mm512_add_epi32(narrow, _mm512_cvtps_epu32(_mm512_mul_ps(e, fixed_one)));
    if (++vectors == kNarrowVectors) {
      widen();
      vectors = 0;
    }
  };
  const auto live = [&](__mmask16 m, __m512 v) TQ_AVX512 { return any ? _mm512_mask_cmp_ps_mask(m, v, neg_inf, _CMP_NEQ_OQ) : 0; };
  int64_t i = 0;
  for (; i + 16 * kExpGroup <= n; i += 16 * kExpGroup) {
    __m512 shifted[kExpGroup], e[kExpGroup];
    __mmask16 visible[kExpGroup];
#pragma GCC unroll 16
    for (int u = 0; u < kExpGroup; ++u) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * u);
      visible[u] = live(0xffff, v);
      shifted[u] = _mm512_sub_ps(v, shift);
    }
    exp16_nonpositive<kExpGroup>(shifted, e);
#pragma GCC unroll 16
    for (int u = 0; u < kExpGroup; ++u) finish(std::true_type{}, i + 16 * u, 0xffff, _mm512_maskz_mov_ps(visible[u], e[u]));
  }
  each_vector(n, [&](auto full, int64_t j, __mmask16 m) TQ_AVX512 {
    const __m512 v = load_lanes<full>(x + j, m);
    finish(full, j, m, _mm512_maskz_mov_ps(live(m, v), exp16_nonpositive(_mm512_sub_ps(v, shift))));
  }, i);
  widen();
  return inverse_of_fixed(static_cast<uint64_t>(_mm512_reduce_add_epi64(wide)));
}

// A lambda, not the function's pointer, so that the conversion is inlined.
TQ_AVX512 float numerators_avx512(float* x, int64_t n, float scale, const float* bias, int64_t bias_from, uint16_t* out_bf16) {
  return numerators_avx512(x, n, scale, bias, bias_from, out_bf16, [](__m512 v) TQ_AVX512 { return rounded_bf16(v); });
}

// With vcvtneps2bf16: one instruction for rounded_bf16's five (the softmax 0.40 ->
// 0.34 ns a score). It rounds to nearest even too; it would take an fp32
// denormal as 0 where rounded_bf16 keeps it, but no numerator is one (the exp
// is at least e^-87, a normal number, or exactly 0 for a masked key).
// Flattened: the conversion needs AVX-512 BF16, which the shared loop's own
// target lacks, so GCC called it for every vector.
#define TQ_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
TQ_AVX512_BF16 __attribute__((flatten)) float numerators_avx512_bf16(float* x, int64_t n, float scale, const float* bias, int64_t bias_from,
                                                                     uint16_t* out_bf16) {
  const auto to_bf16 = [](__m512 v) TQ_AVX512_BF16 { return (__m256i)_mm512_cvtneps_pbh(v); };
  return numerators_avx512(x, n, scale, bias, bias_from, out_bf16, to_bf16);
}
#endif

}  // namespace

float softmax_numerators(float* x, int64_t n, float scale, const float* bias, int64_t bias_from, uint16_t* out_bf16, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512Bf16) return numerators_avx512_bf16(x, n, scale, bias, bias_from, out_bf16);
  if (isa == Isa::Avx512) return numerators_avx512(x, n, scale, bias, bias_from, out_bf16);
#endif
  const float inverse = numerators_generic(x, n, scale, bias, bias_from);
  if (out_bf16) store_scaled(x, 1.0f, n, out_bf16);
  return inverse;
}

}  // namespace tq
