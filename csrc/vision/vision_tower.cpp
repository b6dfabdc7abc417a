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

VisionTower::VisionTower(const Checkpoint& ckpt, const LayerKernels& kernels, at::ScalarType dtype)
    : config_(*ckpt.config().vision), kernels_(kernels), dtype_(dtype) {
  const auto& v = config_;
  const int64_t E = v.embed_dim, hidden = E * v.mlp_ratio;
  const int64_t merged = E * v.spatial_merge_size * v.spatial_merge_size;
  const auto device = kernels.device();
  auto vec = [&](const std::string& name, int64_t n) { return ckpt.get(name, {n}, at::kFloat).to(device).contiguous(); };
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
    b.norm1_b = vec(p + "norm1.bias", E);
    b.norm2_w = vec(p + "norm2.weight", E);
    b.norm2_b = vec(p + "norm2.bias", E);
    b.qkv = linear(p + "attn.qkv", {3 * E, E}, true);
    b.proj = linear(p + "attn.proj", {E, E}, true);
    b.fc1 = linear(p + "mlp.fc1", {hidden, E}, true);
    b.fc2 = linear(p + "mlp.fc2", {E, hidden}, true);
    blocks_.push_back(std::move(b));
  }
  merger_norm_w_ = vec("visual.merger.ln_q.weight", E);
  merger_norm_b_ = vec("visual.merger.ln_q.bias", E);
  merger_fc1_ = linear("visual.merger.mlp.0", {merged, merged}, true);
  merger_fc2_ = linear("visual.merger.mlp.2", {v.out_hidden, merged}, true);
  // VisionRotaryEmbedding(head_dim / 2): head_dim / 4 frequencies per axis.
  const int64_t rot = E / v.num_heads / 2;
  inv_freq_ = 1.0 / at::pow(v.rope_theta, at::arange(0, rot, 2, at::kDouble) / static_cast<double>(rot));
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

at::Tensor VisionTower::embed(const ImagePatches& patches) const {
  const auto& v = config_;
  const int64_t E = v.embed_dim, unit = v.spatial_merge_size * v.spatial_merge_size, n = patches.values.size(0);
  const auto device = kernels_.device();
  auto x = (*patch_embed_)(patches.values.to(device, dtype_), at::kFloat);  // [N, E]
  // 2D RoPE: angles in float64, [N, head_dim / 2] = (row frequencies, column frequencies), repeated.
  auto angles = at::cat({at::outer(patches.rows.to(at::kDouble), inv_freq_), at::outer(patches.cols.to(at::kDouble), inv_freq_)}, -1);
  angles = at::cat({angles, angles}, -1);
  const auto cos = angles.cos().to(device, at::kFloat).unsqueeze(1), sin = angles.sin().to(device, at::kFloat).unsqueeze(1);
  // Every patch at position 0 of one segment, each query's keys all N of them: the whole image is visible to each patch.
  const auto zeros = at::zeros({n}, at::kLong);
  const auto attend = kernels_.plan_attention({zeros, zeros, zeros, zeros, std::vector<int64_t>(n, n)}, zeros, zeros, std::nullopt, v.num_heads);
  for (const auto& b : blocks_) {
    x = x + attention(b, at::layer_norm(x, {E}, b.norm1_w, b.norm1_b, kLayerNormEps), cos, sin, *attend);
    auto h = (*b.fc1)(at::layer_norm(x, {E}, b.norm2_w, b.norm2_b, kLayerNormEps).to(dtype_), at::kFloat);
    h = h * at::sigmoid(1.702 * h);  // QuickGELU
    x = x + (*b.fc2)(h.to(dtype_), at::kFloat);
  }
  auto merged = at::layer_norm(x, {E}, merger_norm_w_, merger_norm_b_, kLayerNormEps).reshape({-1, E * unit});
  auto h = at::gelu((*merger_fc1_)(merged.to(dtype_), at::kFloat));
  return (*merger_fc2_)(h.to(dtype_), at::kFloat).contiguous();
}

}  // namespace tq
