#include "vision/vision_tower.h"

#include <cmath>

namespace tq {
namespace {

constexpr double kLayerNormEps = 1e-6;  // Qwen2VLVisionBlock's and PatchMerger's LayerNorms

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

VisionTower::VisionTower(const Checkpoint& ckpt, at::Device device) : config_(*ckpt.config().vision), device_(device) {
  const auto& v = config_;
  const int64_t E = v.embed_dim, hidden = E * v.mlp_ratio, patch = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const int64_t merged = E * v.spatial_merge_size * v.spatial_merge_size;
  auto get = [&](const std::string& name, at::IntArrayRef shape) { return ckpt.get(name, shape, at::kFloat).to(device).contiguous(); };
  patch_w_ = get("visual.patch_embed.proj.weight", {E, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}).view({E, patch});
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string p = "visual.blocks." + std::to_string(i) + ".";
    blocks_.push_back(Block{get(p + "norm1.weight", {E}), get(p + "norm1.bias", {E}), get(p + "attn.qkv.weight", {3 * E, E}),
                            get(p + "attn.qkv.bias", {3 * E}), get(p + "attn.proj.weight", {E, E}), get(p + "attn.proj.bias", {E}),
                            get(p + "norm2.weight", {E}), get(p + "norm2.bias", {E}), get(p + "mlp.fc1.weight", {hidden, E}),
                            get(p + "mlp.fc1.bias", {hidden}), get(p + "mlp.fc2.weight", {E, hidden}), get(p + "mlp.fc2.bias", {E})});
  }
  merger_norm_w_ = get("visual.merger.ln_q.weight", {E});
  merger_norm_b_ = get("visual.merger.ln_q.bias", {E});
  merger_fc1_w_ = get("visual.merger.mlp.0.weight", {merged, merged});
  merger_fc1_b_ = get("visual.merger.mlp.0.bias", {merged});
  merger_fc2_w_ = get("visual.merger.mlp.2.weight", {v.out_hidden, merged});
  merger_fc2_b_ = get("visual.merger.mlp.2.bias", {v.out_hidden});
  // VisionRotaryEmbedding(head_dim / 2): head_dim / 4 frequencies per axis.
  const int64_t rot = E / v.num_heads / 2;
  inv_freq_ = 1.0 / at::pow(v.rope_theta, at::arange(0, rot, 2, at::kDouble) / static_cast<double>(rot));
}

at::Tensor VisionTower::attention(const Block& b, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const {
  const int64_t n = x.size(0), heads = config_.num_heads, E = config_.embed_dim, hd = E / heads;
  auto qkv = at::linear(x, b.qkv_w, b.qkv_b).view({n, 3, heads, hd});
  auto q = qkv.select(1, 0), k = qkv.select(1, 1), v = qkv.select(1, 2);
  q = (q * cos + rotate_half(q) * sin).transpose(0, 1).contiguous();  // [heads, n, hd]
  k = (k * cos + rotate_half(k) * sin).transpose(0, 1).contiguous();
  v = v.transpose(0, 1).contiguous();
  auto out = at::empty({heads, n, hd}, x.options());
  // Scores of a chunk of queries are [heads, chunk, n] fp32: at most 64 MiB of them at once.
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / (4 * heads * n));
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int64_t a = 0; a < n; a += chunk) {
    const int64_t len = std::min(chunk, n - a);
    auto scores = at::matmul(q.narrow(1, a, len), k.transpose(1, 2)).mul_(scale);
    out.narrow(1, a, len).copy_(at::matmul(at::softmax(scores, -1), v));
  }
  return at::linear(out.transpose(0, 1).reshape({n, E}), b.proj_w, b.proj_b);
}

at::Tensor VisionTower::embed(const ImagePatches& patches) const {
  const auto& v = config_;
  const int64_t E = v.embed_dim, unit = v.spatial_merge_size * v.spatial_merge_size;
  auto x = at::linear(patches.values.to(device_), patch_w_);  // [N, E]
  // 2D RoPE: angles in float64, [N, head_dim / 2] = (row frequencies, column frequencies), repeated.
  auto angles = at::cat({at::outer(patches.rows.to(at::kDouble), inv_freq_), at::outer(patches.cols.to(at::kDouble), inv_freq_)}, -1);
  angles = at::cat({angles, angles}, -1);
  const auto cos = angles.cos().to(device_, at::kFloat).unsqueeze(1), sin = angles.sin().to(device_, at::kFloat).unsqueeze(1);
  for (const auto& b : blocks_) {
    x = x + attention(b, at::layer_norm(x, {E}, b.norm1_w, b.norm1_b, kLayerNormEps), cos, sin);
    auto h = at::linear(at::layer_norm(x, {E}, b.norm2_w, b.norm2_b, kLayerNormEps), b.fc1_w, b.fc1_b);
    h = h * at::sigmoid(1.702 * h);  // QuickGELU
    x = x + at::linear(h, b.fc2_w, b.fc2_b);
  }
  auto merged = at::layer_norm(x, {E}, merger_norm_w_, merger_norm_b_, kLayerNormEps).reshape({-1, E * unit});
  return at::linear(at::gelu(at::linear(merged, merger_fc1_w_, merger_fc1_b_)), merger_fc2_w_, merger_fc2_b_).contiguous();
}

}  // namespace tq
