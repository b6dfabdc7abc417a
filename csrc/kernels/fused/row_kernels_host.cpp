#include "kernels/fused/row_kernels_host.h"

#include <ATen/Parallel.h>

#include <vector>

#include "kernels/math/row_kernels_math.h"

namespace tq::rows {
namespace {

// The scale of row x[0, n), from its 16 lanes' sums as the block computes them.
float norm_scale_of(const float* x, int n, float eps) {
  float lanes[kNormLanes];
  for (int l = 0; l < kNormLanes; ++l) lanes[l] = norm_lane_sum(x, n, l);
  return norm_scale(lanes, x, n, eps);
}

}  // namespace

void add_rms_norm_host(const AddRmsNormArgs& a) {
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* x = a.residual + r * a.n;
      if (a.addend)
        for (int j = 0; j < a.n; ++j) x[j] = exact::add(x[j], load(a.addend, r * a.addend_stride + j, a.addend_bf16));
      const float scale = norm_scale_of(x, a.n, a.eps);
      for (int j = 0; j < a.n; ++j) put(a.out, r * a.n + j, norm_out(x[j], scale, a.weight[j]), a.out_bf16);
    }
  });
}

void qk_norm_rope_host(const QkNormRopeArgs& a) {
  const int per_token = a.heads + 2 * a.kv_heads, d = a.head_dim;
  at::parallel_for(0, static_cast<int64_t>(a.tokens) * per_token, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> in(d), row(d);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / per_token;
      const int h = static_cast<int>(item % per_token);
      for (int j = 0; j < d; ++j) in[j] = load(a.qkv, t * a.token_stride + static_cast<int64_t>(h) * d + j, a.qkv_bf16);
      const float* x = in.data();
      const int64_t slot_row = h < a.heads ? 0 : (a.slots[t] * a.kv_heads + (h - a.heads) % a.kv_heads) * d;
      const int64_t step_row = h < a.heads ? 0 : (t * a.kv_heads + (h - a.heads) % a.kv_heads) * d;
      if (h >= a.heads + a.kv_heads) {
        for (int j = 0; j < d; ++j) put(a.v_cache, slot_row + j, x[j], a.out_bf16);
        if (a.v_step)
          for (int j = 0; j < d; ++j) put(a.v_step, step_row + j, x[j], a.out_bf16);
        continue;
      }
      const bool is_q = h < a.heads;
      const float* norm = is_q ? a.q_norm : a.k_norm;
      if (norm) {
        const float scale = norm_scale_of(x, d, a.eps);
        for (int j = 0; j < d; ++j) row[j] = norm_out(x[j], scale, norm[j]);
      } else {
        row.assign(x, x + d);
      }
      void* out = is_q ? a.q_out : a.k_cache;
      const int64_t out_row = is_q ? (t * a.heads + h) * d : slot_row;
      const float* c = a.rope_rows ? a.cos + a.rope_rows[t] * d : nullptr;
      const float* s = a.rope_rows ? a.sin + a.rope_rows[t] * d : nullptr;
      for (int j = 0; j < d; ++j) {
        const float value = c ? rope_out(row.data(), c, s, d, j) : row[j];
        put(out, out_row + j, value, a.out_bf16);
        if (!is_q && a.k_step) put(a.k_step, step_row + j, value, a.out_bf16);
      }
    }
  });
}

void gated_mul_host(const GatedMulArgs& a) {
  at::parallel_for(0, static_cast<int64_t>(a.rows) * a.n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = i / a.n, j = i % a.n;
      put(a.out, i, gated(load(a.gate, r * a.stride + j, a.in_bf16), load(a.up, r * a.stride + j, a.in_bf16), a.gelu_tanh), a.in_bf16);
    }
  });
}

}  // namespace tq::rows
