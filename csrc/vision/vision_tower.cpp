#include "vision/vision_tower.h"

#include <algorithm>
#include <cmath>

#include "model/rotary.h"
#include "vision/windows.h"

namespace tq {
namespace {

constexpr double kNormEps = 1e-6;  // the blocks' and the PatchMerger's LayerNorms (Qwen2-VL) or RMSNorms (Qwen2.5-VL)

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

VisionTower::VisionTower(const Checkpoint& ckpt, const LayerKernels& kernels, at::ScalarType dtype)
    : config_(*ckpt.config().vision), kernels_(kernels), dtype_(dtype) {
  const auto& v = config_;
  const int64_t E = v.embed_dim, hidden = v.intermediate_size;
  const int64_t merged = E * v.spatial_merge_size * v.spatial_merge_size;
  const auto device = kernels.device();
  auto vec = [&](const std::string& name, int64_t n) { return ckpt.get(name, {n}, at::kFloat).to(device).contiguous(); };
  // A LayerNorm's bias, or none: Qwen2.5-VL's RMSNorms have none.
  auto bias = [&](const std::string& name, int64_t n) { return v.qwen25 ? at::Tensor() : vec(name, n); };
  // A linear layer prepared by the kernels from the weight in the compute dtype (and its fp32 bias).
  auto linear = [&](const std::string& name, at::IntArrayRef shape, bool bias) {
    auto w = ckpt.get(name + ".weight", shape, dtype).reshape({shape[0], -1}).contiguous();
    return kernels.linear(w, bias ? ckpt.get(name + ".bias", {shape[0]}, at::kFloat) : at::Tensor());
  };
  patch_embed_ = linear("visual.patch_embed.proj", {E, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}, false);
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string p = "visual.blocks." + std::to_string(i) + ".";
    Block b;
    b.norm1_w = vec(p + "norm1.weight", E);
    b.norm1_b = bias(p + "norm1.bias", E);
    b.norm2_w = vec(p + "norm2.weight", E);
    b.norm2_b = bias(p + "norm2.bias", E);
    b.qkv = linear(p + "attn.qkv", {3 * E, E}, true);
    b.proj = linear(p + "attn.proj", {E, E}, true);
    if (v.qwen25) {
      b.gate = linear(p + "mlp.gate_proj", {hidden, E}, true);
      b.up = linear(p + "mlp.up_proj", {hidden, E}, true);
      b.down = linear(p + "mlp.down_proj", {E, hidden}, true);
      b.windowed = std::find(v.full_attention_blocks.begin(), v.full_attention_blocks.end(), i) == v.full_attention_blocks.end();
    } else {
      b.fc1 = linear(p + "mlp.fc1", {hidden, E}, true);
      b.fc2 = linear(p + "mlp.fc2", {E, hidden}, true);
    }
    blocks_.push_back(std::move(b));
  }
  merger_norm_w_ = vec("visual.merger.ln_q.weight", E);
  merger_norm_b_ = bias("visual.merger.ln_q.bias", E);
  merger_fc1_ = linear("visual.merger.mlp.0", {merged, merged}, true);
  merger_fc2_ = linear("visual.merger.mlp.2", {v.out_hidden, merged}, true);
  // VisionRotaryEmbedding(head_dim / 2): head_dim / 4 frequencies per axis.
  const int64_t rot = E / v.num_heads / 2;
  inv_freq_ = inverse_powers(v.rope_theta, rot);
}

at::Tensor VisionTower::attention(const Block& b, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const StepAttention& attend) const {
  const int64_t n = x.size(0), heads = config_.num_heads, E = config_.embed_dim, hd = E / heads;
  auto qkv = (*b.qkv)(x.to(dtype_), at::kFloat).view({n, 3, heads, hd});
  auto q = qkv.select(1, 0), k = qkv.select(1, 1);
  q = (q * cos + rotate_half(q) * sin).to(dtype_).contiguous();  // [n, heads, hd]
  k = (k * cos + rotate_half(k) * sin).to(dtype_).contiguous();
  auto v = qkv.select(1, 2).to(dtype_).contiguous();
  return (*b.proj)(attend(q, k, v).view({n, E}), at::kFloat);
}

at::Tensor VisionTower::norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
  if (config_.qwen25) return kernels_.rms_norm(x, w, kNormEps, at::kFloat);
  return kernels_.layer_norm(x, w, b, kNormEps);
}

at::Tensor VisionTower::mlp(const Block& b, const at::Tensor& x) const {
  const auto in = x.to(dtype_);
  if (config_.qwen25) {
    auto gate = (*b.gate)(in, dtype_);
    return (*b.down)(kernels_.gated_mul(gate, (*b.up)(in, dtype_), GateActivation::Silu), at::kFloat);
  }
  auto h = (*b.fc1)(in, at::kFloat);
  kernels_.quick_gelu_(h);
  return (*b.fc2)(h.to(dtype_), at::kFloat);
}

at::Tensor VisionTower::embed(const ImagePatches& patches) const {
  const auto& v = config_;
  const int64_t E = v.embed_dim, unit = v.spatial_merge_size * v.spatial_merge_size, n = patches.values.size(0);
  const auto device = kernels_.device();
  auto x = (*patch_embed_)(patches.values.to(device, dtype_), at::kFloat);  // [N, E]
  // 2D RoPE: angles in float64, [N, head_dim / 2] = (row frequencies, column frequencies), repeated.
  auto angles = at::cat({at::outer(patches.rows.to(at::kDouble), inv_freq_), at::outer(patches.cols.to(at::kDouble), inv_freq_)}, -1);
  // One segment: the whole image is visible to each patch.
  const auto full = kernels_.plan_segment_attention(at::zeros({n}, at::kLong), v.num_heads);
  // Qwen2.5-VL: the patches in window order, a window one segment whose patches see each other only.
  std::unique_ptr<StepAttention> windowed;
  std::vector<int64_t> units;
  if (v.qwen25) {
    const int64_t m = v.spatial_merge_size;
    const auto w = window_order(patches.grid_h / m, patches.grid_w / m, v.window_size / v.patch_size / m);
    std::vector<int64_t> order, window;
    for (size_t i = 0; i < w.units.size(); ++i)
      for (int64_t j = 0; j < unit; ++j) {
        order.push_back(w.units[i] * unit + j);
        window.push_back(w.window_of[i]);
      }
    const auto in_order = at::tensor(order, at::kLong);
    x = x.index_select(0, in_order.to(device));
    angles = angles.index_select(0, in_order);
    windowed = kernels_.plan_segment_attention(at::tensor(window, at::kLong), v.num_heads);
    units = w.units;
  }
  angles = at::cat({angles, angles}, -1);
  const auto [cos_table, sin_table] = cos_sin(angles);
  const auto cos = cos_table.to(device, at::kFloat).unsqueeze(1), sin = sin_table.to(device, at::kFloat).unsqueeze(1);
  for (const auto& b : blocks_) {
    x = x + attention(b, norm(x, b.norm1_w, b.norm1_b), cos, sin, b.windowed ? *windowed : *full);
    x = x + mlp(b, norm(x, b.norm2_w, b.norm2_b));
  }
  auto merged = norm(x, merger_norm_w_, merger_norm_b_).reshape({-1, E * unit});
  auto h = at::gelu((*merger_fc1_)(merged.to(dtype_), at::kFloat));
  auto out = (*merger_fc2_)(h.to(dtype_), at::kFloat);
  if (units.empty()) return out.contiguous();
  // Back from window order to the image's: the row of unit u is the one at u's place in `units`.
  std::vector<int64_t> place(units.size());
  for (size_t k = 0; k < units.size(); ++k) place[units[k]] = static_cast<int64_t>(k);
  return out.index_select(0, at::tensor(place, at::kLong).to(device)).contiguous();
}

}  // namespace tq
