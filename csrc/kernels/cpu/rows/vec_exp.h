// exp for float arrays in a form GCC vectorizes: every loop is a plain
// elementwise loop over arrays of at most kExpBlock floats; bit patterns go
// through a union (supported by GCC and Clang) because bit casts of single
// values inside a loop defeat the vectorizer. This libtorch's own exp-based
// kernels (silu, softmax) run a scalar exp: ~0.6 G elements/s here.
#pragma once
#include <algorithm>
#include <cstdint>

namespace tq {

constexpr int kExpBlock = 256;

union ExpLanes {
  uint32_t u[kExpBlock];
  int32_t i[kExpBlock];
  float f[kExpBlock];
};

// out[j] = exp(x[j]) for n <= kExpBlock: 2^k * e^r with |r| <= ln2/2 and a
// degree-6 Taylor polynomial (relative error < 2e-7); inputs below -87 give
// about 1.6e-38 rather than 0, callers that need exact zeros select them.
// This is the engine's exp at every level (docs/arithmetic.md): every
// multiply and add rounded on its own, in this order; exp16_nonpositive below
// repeats it for the softmax.
inline void exp_block(const float* x, float* out, int n) {
  ExpLanes r, scale;
  for (int j = 0; j < n; ++j) {
    const float v = std::min(std::max(x[j], -87.0f), 88.0f);
    const float k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
    r.f[j] = v - k * 0.693145751953125f - k * 1.428606765330187e-06f;
    scale.i[j] = (static_cast<int32_t>(k) + 127) << 23;  // the bits of 2^k
  }
  for (int j = 0; j < n; ++j) {
    const float t = r.f[j];
    float p = 1.0f / 720;
    p = p * t + 1.0f / 120;
    p = p * t + 1.0f / 24;
    p = p * t + 1.0f / 6;
    p = p * t + 0.5f;
    p = p * t + 1.0f;
    p = p * t + 1.0f;
    out[j] = p * scale.f[j];
  }
}

}  // namespace tq

#if defined(__x86_64__)
#include "common/x86_intrinsics.h"

#include <cstdlib>

namespace tq {

// AVX-512 for the attention softmax, 16 floats at a time: exp_block's
// arithmetic, operation for operation (the clamp, the rounding of k, every
// multiply and add rounded on its own, 2^k as a multiply), so that a numerator
// is the same bits at every level (docs/arithmetic.md). Fused multiply-adds
// here would be faster by a few percent of the softmax, and would make
// avx512 answers differ from avx2 and generic ones. With the bf16 output
// written in the same pass it is faster than the generic loops plus a
// conversion; for SwiGLU the generic loops were faster than intrinsics, so
// they stay there (bench/README.md, "Measurements behind the CPU kernels").
#define TQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

TQ_AVX512 inline __m512 mul16(__m512 a, float b) { return _mm512_mul_ps(a, _mm512_set1_ps(b)); }
TQ_AVX512 inline __m512 add16(__m512 a, float b) { return _mm512_add_ps(a, _mm512_set1_ps(b)); }

// For x <= 0 (or NaN), as the softmax's v - max always is: there exp_block's
// clamp at 88 never applies, and is left out. 2^k's bits come from t, whose
// low mantissa bits hold k (t = 1.5 * 2^23 + k exactly, for |k| < 2^22): the
// same bits as converting k, one instruction fewer (bench/README.md, "CPU attention").
// U vectors side by side, each step taken for all of them in turn: one vector's
// exp is a chain of some twenty dependent operations, which alone leaves the
// vector units waiting on it (the softmax's numerators take 8).
template <int U>
TQ_AVX512 inline void exp16_nonpositive(const __m512 (&x)[U], __m512 (&out)[U]) {
  __m512 t[U], r[U], p[U];
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    const __m512 v = _mm512_max_ps(x[u], _mm512_set1_ps(-87.0f));
    t[u] = add16(mul16(v, 1.44269504088896341f), 12582912.0f);
    const __m512 k = _mm512_sub_ps(t[u], _mm512_set1_ps(12582912.0f));
    r[u] = _mm512_sub_ps(_mm512_sub_ps(v, mul16(k, 0.693145751953125f)), mul16(k, 1.428606765330187e-06f));
    p[u] = _mm512_set1_ps(1.0f / 720);
  }
  const auto horner = [&](float c) TQ_AVX512 {
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u) p[u] = add16(_mm512_mul_ps(p[u], r[u]), c);
  };
  horner(1.0f / 120);
  horner(1.0f / 24);
  horner(1.0f / 6);
  horner(0.5f);
  horner(1.0f);
  horner(1.0f);
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    // (bits(t) + 127) << 23 = (k + 127) << 23: bits(t) is 0x4B400000 + k, whose high part shifts out.
    const __m512i scale = _mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t[u]), _mm512_set1_epi32(127)), 23);
    out[u] = _mm512_mul_ps(p[u], _mm512_castsi512_ps(scale));
  }
}
TQ_AVX512 inline __m512 exp16_nonpositive(__m512 x) {
  const __m512 in[1] = {x};
  __m512 out[1];
  exp16_nonpositive<1>(in, out);
  return out[0];
}

// Lanes [0, n - i) of the 16 starting at i, for tails.
TQ_AVX512 inline __mmask16 lanes_from(int64_t i, int64_t n) {
  return n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

// Round to nearest even, as at::BFloat16 does.
TQ_AVX512 inline __m256i rounded_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  return _mm512_cvtepi32_epi16(rounded);
}

}  // namespace tq
#endif
