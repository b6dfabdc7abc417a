// The per-row arithmetic of the fused CUDA row kernels (kernels/cuda/row_kernels.cu),
// written once for host and device in the exact order of the engine's CPU
// kernels, so that a row computed on the GPU is the same bits as on the CPU
// (test/native/row_kernels_check.cpp compares these functions, run on the host,
// with the CPU kernels: kernels/cpu/rows/row_math.cpp, swiglu.cpp, vec_exp.h):
//   RMSNorm    16 lane sums of squares (lane l: x[l], x[l + 16], ... over the
//              whole 16-blocks), then the tail, then the lanes in order;
//              scale 1 / sqrt(sum / n + eps); y = x * scale * w.
//   RoPE       rotate-half: y[j] = x[j] cos[j] - x[j + n/2] sin[j], and
//              y[j + n/2] = x[j + n/2] cos[j + n/2] + x[j] sin[j + n/2].
//   gated MLP  act(g) * u as g / (1 + exp(-z)) * u (silu: z = g; gelu-tanh:
//              z = 2 sqrt(2/pi) (g + 0.044715 g^3)), exp as vec_exp.h's.
// Every product and sum rounded on its own (exact::), as the CPU kernels are
// compiled (fp-contract=off).
#pragma once
#include "kernels/math/host_device_math.h"

namespace tq::rows {

constexpr int kNormLanes = 16;

// Element i of an fp32 or bf16 (bits) array, read or written in fp32: the kernels' dtype is an argument.
TQ_HOST_DEVICE inline float load(const void* p, int64_t i, bool bf16) {
  return bf16 ? exact::widen(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
TQ_HOST_DEVICE inline void put(void* p, int64_t i, float x, bool bf16) {
  if (bf16) exact::store(x, static_cast<uint16_t*>(p) + i);
  else exact::store(x, static_cast<float*>(p) + i);
}

TQ_HOST_DEVICE inline float square(float x) { return exact::mul(x, x); }

// Four neighbouring bf16 values as one 8-byte word (the first in the low half of lo), widened and narrowed as load()
// and put() do one at a time: what a lane of a kernel's quad form moves in one access.
struct Bf16Quad {
  uint32_t lo, hi;
};
TQ_HOST_DEVICE inline void widen_quad(Bf16Quad q, float* to) {
  to[0] = exact::widen(static_cast<uint16_t>(q.lo & 0xffffu));
  to[1] = exact::widen(static_cast<uint16_t>(q.lo >> 16));
  to[2] = exact::widen(static_cast<uint16_t>(q.hi & 0xffffu));
  to[3] = exact::widen(static_cast<uint16_t>(q.hi >> 16));
}
TQ_HOST_DEVICE inline Bf16Quad narrow_quad(const float* x) {
  const auto b = [&](int i) { return static_cast<uint32_t>(exact::narrow_bf16(x[i])); };
  return {b(0) | (b(1) << 16), b(2) | (b(3) << 16)};
}

// Lane `lane`'s sum of squares over the whole 16-blocks of x[0, n).
TQ_HOST_DEVICE inline float norm_lane_sum(const float* x, int n, int lane) {
  float acc = 0.0f;
  for (int j = 0; j + kNormLanes <= n; j += kNormLanes) acc = exact::add(acc, square(x[j + lane]));
  return acc;
}

// The row's scale from its lanes' sums: the tail's squares first, then the lanes in order.
TQ_HOST_DEVICE inline float norm_scale(const float* lane_sums, const float* x, int n, float eps) {
  float sum = 0.0f;
  for (int j = n - n % kNormLanes; j < n; ++j) sum = exact::add(sum, exact::mul(x[j], x[j]));
  for (int l = 0; l < kNormLanes; ++l) sum = exact::add(sum, lane_sums[l]);
  return exact::div(1.0f, sqrtf(exact::add(exact::div(sum, static_cast<float>(n)), eps)));
}

TQ_HOST_DEVICE inline float norm_out(float x, float scale, float w) { return exact::mul(exact::mul(x, scale), w); }

// Element j of rotate-half RoPE from its values: x[j], its partner x[j + n/2] (first half) or x[j - n/2], cos[j], sin[j].
TQ_HOST_DEVICE inline float rope_value(float x, float partner, float cos, float sin, bool first_half) {
  if (first_half) return exact::add(exact::mul(x, cos), -exact::mul(partner, sin));
  return exact::add(exact::mul(x, cos), exact::mul(partner, sin));
}

// Element j of rotate-half RoPE of a head of n values.
TQ_HOST_DEVICE inline float rope_out(const float* x, const float* cos, const float* sin, int n, int j) {
  const int half = n / 2;
  return rope_value(x[j], j < half ? x[j + half] : x[j - half], cos[j], sin[j], j < half);
}

// vec_exp.h's exp: 2^k e^r, |r| <= ln2 / 2, a degree-6 polynomial.
TQ_HOST_DEVICE inline float exp_poly(float x) {
  const float v = fminf(fmaxf(x, -87.0f), 88.0f);
  const float k = exact::add(exact::add(exact::mul(v, 1.44269504088896341f), 12582912.0f), -12582912.0f);
  const float r = exact::add(exact::add(v, -exact::mul(k, 0.693145751953125f)), -exact::mul(k, 1.428606765330187e-06f));
  const float scale = exact::from_bits(static_cast<uint32_t>((static_cast<int32_t>(k) + 127) << 23));  // 2^k
  float p = 1.0f / 720;
  p = exact::add(exact::mul(p, r), 1.0f / 120);
  p = exact::add(exact::mul(p, r), 1.0f / 24);
  p = exact::add(exact::mul(p, r), 1.0f / 6);
  p = exact::add(exact::mul(p, r), 0.5f);
  p = exact::add(exact::mul(p, r), 1.0f);
  p = exact::add(exact::mul(p, r), 1.0f);
  return exact::mul(p, scale);
}

// act(g) * u: silu (gelu_tanh false) or gelu_pytorch_tanh.
TQ_HOST_DEVICE inline float gated(float g, float u, bool gelu_tanh) {
  float neg;
  if (!gelu_tanh) neg = -g;
  else neg = exact::mul(-1.5957691216057308f, exact::add(g, exact::mul(exact::mul(exact::mul(0.044715f, g), g), g)));
  return exact::mul(exact::div(g, exact::add(1.0f, exp_poly(neg))), u);
}

}  // namespace tq::rows
