// No fused multiply-add contraction in this file: GCC contracts a * b + c in
// a vectorized loop but computes its scalar tail as written, so an element's
// exp (and so a softmax numerator or a SiLU) would change with its place in
// the array, that is with the keys or rows around it. Measured: the portable
// softmax of one row of 37 scores gave other bits at 23 of 40 offsets; with
// contraction off, at none (test/native/softmax_check.cpp).
#pragma GCC optimize("fp-contract=off")
#include "kernels/cpu/swiglu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/vec_exp.h"

namespace tq {
namespace {

constexpr int kBlock = kExpBlock;
using Lanes = ExpLanes;

// g[j] = silu(g[j]) * u[j] = g[j] / (1 + exp(-g[j])) * u[j], for n <= kBlock floats.
inline void silu_mul_block(float* g, const float* u, int n) {
  Lanes neg, e;
  for (int j = 0; j < n; ++j) neg.f[j] = -g[j];
  exp_block(neg.f, e.f, n);
  for (int j = 0; j < n; ++j) g[j] = g[j] / (1.0f + e.f[j]) * u[j];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void silu_mul_f32(float* gate, const float* up, int64_t n) {
  for (int64_t a = 0; a < n; a += kBlock) silu_mul_block(gate + a, up + a, static_cast<int>(std::min<int64_t>(kBlock, n - a)));
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void silu_mul_bf16(uint16_t* gate, const uint16_t* up, int64_t n) {
  Lanes g, u;
  for (int64_t a = 0; a < n; a += kBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kBlock, n - a));
    for (int j = 0; j < m; ++j) {
      g.u[j] = static_cast<uint32_t>(gate[a + j]) << 16;
      u.u[j] = static_cast<uint32_t>(up[a + j]) << 16;
    }
    silu_mul_block(g.f, u.f, m);
    for (int j = 0; j < m; ++j) gate[a + j] = bf16_bits(g.u[j]);
  }
}

}  // namespace

at::Tensor& silu_mul_(at::Tensor& gate, const at::Tensor& up) {
  TORCH_CHECK(gate.is_contiguous() && up.is_contiguous() && gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type(),
              "silu_mul_: gate and up must be contiguous tensors of one shape and dtype");
  const int64_t n = gate.numel();
  constexpr int64_t kGrain = 1 << 16;
  if (gate.scalar_type() == at::kFloat) {
    float* g = gate.data_ptr<float>();
    const float* u = up.data_ptr<float>();
    at::parallel_for(0, n, kGrain, [&](int64_t a, int64_t b) { silu_mul_f32(g + a, u + a, b - a); });
  } else {
    TORCH_CHECK(gate.scalar_type() == at::kBFloat16, "silu_mul_: fp32 or bf16 only");
    auto* g = reinterpret_cast<uint16_t*>(gate.data_ptr<at::BFloat16>());
    const auto* u = reinterpret_cast<const uint16_t*>(up.data_ptr<at::BFloat16>());
    at::parallel_for(0, n, kGrain, [&](int64_t a, int64_t b) { silu_mul_bf16(g + a, u + a, b - a); });
  }
  return gate;
}

}  // namespace tq
