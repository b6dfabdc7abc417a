// No fused multiply-add contraction in this file: GCC contracts a * b + c in
// a vectorized loop but computes its scalar tail as written, so an element's
// exp (and so a softmax numerator or a SiLU) would change with its place in
// the array, that is with the keys or rows around it. Measured: the generic
// softmax of one row of 37 scores gave other bits at 23 of 40 offsets; with
// contraction off, at none (test/native/softmax_check.cpp).
#pragma GCC optimize("fp-contract=off")
#include "kernels/cpu/rows/swiglu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/rows/vec_exp.h"

namespace tq {
namespace {

constexpr int kBlock = kExpBlock;
using Lanes = ExpLanes;

// Both activations are x * sigmoid(z): silu with z = x; gelu_pytorch_tanh, 0.5 x (1 + tanh(y))
// with y = sqrt(2 / pi) (x + 0.044715 x^3), with z = 2y (as 0.5 (1 + tanh(y)) = sigmoid(2y)).
// g[j] = g[j] / (1 + exp(-z[j])) * u[j], for n <= kBlock floats.
template <GateActivation Act>
inline void gated_block(float* g, const float* u, int n) {
  Lanes neg, e;
  if (Act == GateActivation::Silu) {
    for (int j = 0; j < n; ++j) neg.f[j] = -g[j];
  } else {
    for (int j = 0; j < n; ++j) neg.f[j] = -1.5957691216057308f * (g[j] + 0.044715f * g[j] * g[j] * g[j]);  // -2 sqrt(2 / pi) (...)
  }
  exp_block(neg.f, e.f, n);
  for (int j = 0; j < n; ++j) g[j] = g[j] / (1.0f + e.f[j]) * u[j];
}

inline void gated_block(float* g, const float* u, int n, GateActivation act) {
  if (act == GateActivation::Silu) gated_block<GateActivation::Silu>(g, u, n);
  else gated_block<GateActivation::GeluTanh>(g, u, n);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void gated_mul_f32(float* gate, const float* up, int64_t n, GateActivation act) {
  for (int64_t a = 0; a < n; a += kBlock) gated_block(gate + a, up + a, static_cast<int>(std::min<int64_t>(kBlock, n - a)), act);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void gated_mul_bf16(uint16_t* gate, const uint16_t* up, int64_t n, GateActivation act) {
  Lanes g, u;
  for (int64_t a = 0; a < n; a += kBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kBlock, n - a));
    for (int j = 0; j < m; ++j) {
      g.u[j] = static_cast<uint32_t>(gate[a + j]) << 16;
      u.u[j] = static_cast<uint32_t>(up[a + j]) << 16;
    }
    gated_block(g.f, u.f, m, act);
    for (int j = 0; j < m; ++j) gate[a + j] = bf16_bits(g.u[j]);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void quick_gelu_f32(float* x, int64_t n) {
  Lanes neg, e;
  for (int64_t a = 0; a < n; a += kBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kBlock, n - a));
    for (int j = 0; j < m; ++j) neg.f[j] = -(1.702f * x[a + j]);
    exp_block(neg.f, e.f, m);
    for (int j = 0; j < m; ++j) x[a + j] = x[a + j] / (1.0f + e.f[j]);
  }
}

}  // namespace

at::Tensor& quick_gelu_(at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "quick_gelu_: a contiguous fp32 tensor");
  float* p = x.data_ptr<float>();
  at::parallel_for(0, x.numel(), 1 << 16, [&](int64_t a, int64_t b) { quick_gelu_f32(p + a, b - a); });
  return x;
}

at::Tensor& gated_mul_(at::Tensor& gate, const at::Tensor& up, GateActivation act) {
  TORCH_CHECK(gate.is_contiguous() && up.is_contiguous() && gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type(),
              "gated_mul_: gate and up must be contiguous tensors of one shape and dtype");
  const int64_t n = gate.numel();
  constexpr int64_t kGrain = 1 << 16;
  if (gate.scalar_type() == at::kFloat) {
    float* g = gate.data_ptr<float>();
    const float* u = up.data_ptr<float>();
    at::parallel_for(0, n, kGrain, [&](int64_t a, int64_t b) { gated_mul_f32(g + a, u + a, b - a, act); });
  } else {
    TORCH_CHECK(gate.scalar_type() == at::kBFloat16, "gated_mul_: fp32 or bf16 only");
    auto* g = reinterpret_cast<uint16_t*>(gate.data_ptr<at::BFloat16>());
    const auto* u = reinterpret_cast<const uint16_t*>(up.data_ptr<at::BFloat16>());
    at::parallel_for(0, n, kGrain, [&](int64_t a, int64_t b) { gated_mul_bf16(g + a, u + a, b - a, act); });
  }
  return gate;
}

}  // namespace tq
