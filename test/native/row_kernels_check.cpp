// The fused CUDA row kernels' arithmetic (csrc/kernels/math/row_kernels_math.h), run
// here on the host, against the engine's CPU kernels (linked from the engine
// library): RMSNorm (after a residual add), Qwen3's per-head q/k norm then
// RoPE, and the gated MLP's silu and gelu-tanh, in fp32 and bf16, over row
// lengths with and without a tail after the 16-lane blocks. Prints one JSON
// line per kernel and dtype: elements compared and elements whose bits differ.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/rows/rowwise.h"
#include "kernels/cpu/rows/swiglu.h"
#include "kernels/fused/row_kernels_host.h"
#include "kernels/math/row_kernels_math.h"

using namespace tq;

namespace {

// Stores an fp32 result as the CPU kernels would in `dtype`.
at::Tensor stored(const std::vector<float>& values, at::IntArrayRef shape, at::ScalarType dtype) {
  auto t = at::empty(shape, at::kFloat);
  std::memcpy(t.data_ptr<float>(), values.data(), values.size() * sizeof(float));
  return t.to(dtype);
}

int64_t differing(const at::Tensor& a, const at::Tensor& b) {
  const auto x = a.contiguous().view({-1}), y = b.contiguous().view({-1});
  if (x.scalar_type() == at::kBFloat16) return x.view(at::kShort).ne(y.view(at::kShort)).sum().item<int64_t>();
  return x.view(at::kInt).ne(y.view(at::kInt)).sum().item<int64_t>();
}

void report(const char* kernel, at::ScalarType dtype, int64_t compared, int64_t differ) {
  std::printf("{\"kernel\":\"%s\",\"dtype\":\"%s\",\"compared\":%lld,\"differing\":%lld}\n", kernel, dtype == at::kFloat ? "fp32" : "bf16",
              (long long)compared, (long long)differ);
}

// The twin of one row's RMSNorm in fp32, its sums of squares as the CUDA kernel forms them: each of the 16 lanes
// over the whole row.
std::vector<float> norm_row(const float* x, const float* w, int n, float eps) {
  float lanes[rows::kNormLanes];
  for (int l = 0; l < rows::kNormLanes; ++l) lanes[l] = rows::norm_lane_sum(x, n, l);
  const float scale = rows::norm_scale(lanes, x, n, eps);
  std::vector<float> y(n);
  for (int j = 0; j < n; ++j) y[j] = rows::norm_out(x[j], scale, w[j]);
  return y;
}

void check_add_rms_norm(at::ScalarType dtype) {
  int64_t compared = 0, differ = 0;
  for (int n : {8, 37, 64, 1000, 1024, 3072}) {
    const int rows_n = 9;
    auto residual = at::randn({rows_n, n}) * 3, addend = at::randn({rows_n, n}).to(dtype), w = at::randn({n}) + 1;
    // The CPU: residual.add_(addend in fp32), then the engine's RMSNorm.
    auto cpu_res = residual.clone().add_(addend.to(at::kFloat));
    auto cpu = rms_norm(cpu_res, w, 1e-6, dtype);
    std::vector<float> twin;
    auto res = residual.clone();
    auto add = addend.to(at::kFloat);
    for (int r = 0; r < rows_n; ++r) {
      float* x = res.data_ptr<float>() + r * n;
      for (int j = 0; j < n; ++j) x[j] = exact::add(x[j], add.data_ptr<float>()[r * n + j]);
      auto y = norm_row(x, w.data_ptr<float>(), n, 1e-6f);
      twin.insert(twin.end(), y.begin(), y.end());
    }
    differ += differing(stored(twin, {rows_n, n}, dtype), cpu) + differing(res, cpu_res);
    compared += 2 * rows_n * n;
  }
  report("add_rms_norm", dtype, compared, differ);
}

void check_qk_norm_rope(at::ScalarType dtype) {
  int64_t compared = 0, differ = 0;
  for (int d : {16, 32, 64, 128}) {
    const int tokens = 7, heads = 3, max_pos = 50;
    auto x = at::randn({tokens, heads, d}) * 2, w = at::randn({d}) + 1;
    auto angles = at::arange(max_pos, at::kFloat).unsqueeze(1) * at::rand({d});
    auto cos = angles.cos().contiguous(), sin = angles.sin().contiguous();
    auto positions = at::randint(0, max_pos, {tokens}, at::kLong);
    auto cpu = rope(rms_norm(x, w, 1e-6, at::kFloat), cos, sin, positions, dtype);
    std::vector<float> twin;
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h) {
        const auto normed = norm_row(x.data_ptr<float>() + (t * heads + h) * d, w.data_ptr<float>(), d, 1e-6f);
        const int64_t p = positions.data_ptr<int64_t>()[t];
        for (int j = 0; j < d; ++j) twin.push_back(rows::rope_out(normed.data(), cos.data_ptr<float>() + p * d, sin.data_ptr<float>() + p * d, d, j));
      }
    differ += differing(stored(twin, {tokens, heads, d}, dtype), cpu);
    compared += tokens * heads * d;
  }
  report("qk_norm_rope", dtype, compared, differ);
}

// The fused qk_norm_rope reading its qkv rows in bf16 (the GEMM's own output, ATen's bf16 GEMM without a bias) gives the
// bits it gives reading the same values widened to fp32 (as they came before): the host form, whose load the kernel shares.
void check_qk_bf16_input(at::ScalarType out_dtype) {
  const int tokens = 5, heads = 4, kv_heads = 2, d = 128, slots = 16;
  const auto qkv16 = (at::randn({tokens, (heads + 2 * kv_heads) * d}) * 2).to(at::kBFloat16);
  const auto qkv32 = qkv16.to(at::kFloat);
  const auto qn = at::randn({d}) + 1, kn = at::randn({d}) + 1;
  auto angles = at::arange(40, at::kFloat).unsqueeze(1) * at::rand({d});
  const auto cos = angles.cos().contiguous(), sin = angles.sin().contiguous();
  const auto positions = at::randint(0, 40, {tokens}, at::kLong), where = at::randperm(slots, at::kLong).slice(0, 0, tokens).contiguous();
  at::Tensor step_k, step_v, stored_k, stored_v;  // the last run's step keys, and its store's rows at the tokens' slots
  auto run = [&](const at::Tensor& qkv) {
    auto q = at::zeros({tokens, heads, d}, out_dtype), k = at::zeros({slots, kv_heads, d}, out_dtype), v = at::zeros({slots, kv_heads, d}, out_dtype);
    step_k = at::zeros({tokens, kv_heads, d}, out_dtype);
    step_v = at::zeros_like(step_k);
    rows::QkNormRopeArgs a{tokens, heads, kv_heads, d, qkv.data_ptr(), qkv.scalar_type() == at::kBFloat16, qkv.stride(0), qn.data_ptr<float>(),
                           kn.data_ptr<float>(), 1e-6f, cos.data_ptr<float>(), sin.data_ptr<float>(), positions.data_ptr<int64_t>(), q.data_ptr(),
                           k.data_ptr(), v.data_ptr(), where.data_ptr<int64_t>(), step_k.data_ptr(), step_v.data_ptr(), out_dtype == at::kBFloat16};
    rows::qk_norm_rope_host(a);
    stored_k = k.index_select(0, where);
    stored_v = v.index_select(0, where);
    return at::cat({q.view({-1}), k.view({-1}), v.view({-1})});
  };
  const auto a = run(qkv16), b = run(qkv32);
  const int64_t written = a.ne(0).sum().item<int64_t>();  // q, and k and v at the tokens' slots: nothing left unwritten there
  report("qk_norm_rope_bf16_qkv", out_dtype, a.numel(), differing(a, b) + (written < tokens * (heads + 2 * kv_heads) * d ? a.numel() : 0));
  // The step's keys and values (StepKeys, which the cascade reads in place of the store's copy): each token's row the
  // bits of its slot's, every element written.
  const auto step = at::cat({step_k.view({-1}), step_v.view({-1})}), store = at::cat({stored_k.view({-1}), stored_v.view({-1})});
  const int64_t step_written = step.ne(0).sum().item<int64_t>();
  report("qk_norm_rope_step_keys", out_dtype, step.numel(), differing(step, store) + (step_written < step.numel() ? step.numel() : 0));
}

void check_gated(at::ScalarType dtype, bool gelu) {
  int64_t compared = 0, differ = 0;
  for (int64_t n : {7, 256, 1000, 3072 * 5 + 3}) {
    // Wide enough to reach exp's clamps at both ends.
    auto gate = (at::randn({n}) * 30).to(dtype), up = at::randn({n}).to(dtype);
    auto cpu = gate.clone();
    gated_mul_(cpu, up, gelu ? GateActivation::GeluTanh : GateActivation::Silu);
    auto g = gate.to(at::kFloat), u = up.to(at::kFloat);
    std::vector<float> twin(n);
    for (int64_t i = 0; i < n; ++i) twin[i] = rows::gated(g.data_ptr<float>()[i], u.data_ptr<float>()[i], gelu);
    differ += differing(stored(twin, {n}, dtype), cpu);
    compared += n;
  }
  report(gelu ? "gelu_tanh_mul" : "silu_mul", dtype, compared, differ);
}

}  // namespace

// The quad form's moves (a lane's four bf16 neighbours in one 8-byte word): widened as load() widens each, narrowed as
// put() narrows each, over random bit patterns, NaNs with payloads among them.
void check_bf16_quads() {
  int64_t compared = 0, differ = 0;
  auto bits = at::randint(0, 1 << 16, {4096}, at::kInt);
  for (int64_t i = 0; i + 4 <= bits.size(0); i += 4) {
    uint16_t four[4];
    for (int j = 0; j < 4; ++j) four[j] = static_cast<uint16_t>(bits[i + j].item<int>());
    rows::Bf16Quad q;
    std::memcpy(&q, four, sizeof q);
    float wide[4];
    rows::widen_quad(q, wide);
    uint16_t narrowed[4];
    const auto back = rows::narrow_quad(wide);
    std::memcpy(narrowed, &back, sizeof narrowed);
    for (int j = 0; j < 4; ++j) {
      const float one = rows::load(four, j, true);
      uint16_t put_back;
      rows::put(&put_back, 0, one, true);
      differ += std::memcmp(&one, &wide[j], sizeof one) != 0 || put_back != narrowed[j];
      ++compared;
    }
  }
  report("bf16_quads", at::kBFloat16, compared, differ);
}

int main() {
  at::manual_seed(11);
  check_bf16_quads();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    check_add_rms_norm(dtype);
    check_qk_norm_rope(dtype);
    check_qk_bf16_input(dtype);
    check_gated(dtype, false);
    check_gated(dtype, true);
  }
  return 0;
}
