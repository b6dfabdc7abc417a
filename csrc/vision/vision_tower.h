// Qwen2-VL's vision tower: a ViT whose patch embedding is one linear map of a
// 14x14x2x3 patch (the checkpoint's Conv3d, stride = kernel), 2D RoPE (the
// first half of each head's rotary frequencies driven by the patch's row, the
// second by its column), bidirectional attention within one image, pre-norm
// LayerNorm blocks with a QuickGELU MLP, then the PatchMerger: LayerNorm, each
// 2x2 group of patches concatenated, and an MLP (exact GELU) into the text
// model's hidden size. It runs in fp32 with ATen's ops on the engine's device.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "model/checkpoint.h"
#include "vision/patches.h"

namespace tq {

class VisionTower {
 public:
  VisionTower(const Checkpoint& ckpt, at::Device device);
  // One image's embeddings, [N / merge^2, text hidden] fp32 on the device, one row per
  // image token in the prompt's order (merged grid rows, then columns).
  at::Tensor embed(const ImagePatches& patches) const;
  const VisionConfig& config() const { return config_; }

 private:
  struct Block {
    at::Tensor norm1_w, norm1_b, qkv_w, qkv_b, proj_w, proj_b, norm2_w, norm2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  };
  // Bidirectional attention over the image's patches, query rows in chunks to bound memory.
  at::Tensor attention(const Block& b, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const;

  VisionConfig config_;
  at::Device device_;
  at::Tensor patch_w_;  // [embed_dim, C * T * ps * ps]
  std::vector<Block> blocks_;
  at::Tensor merger_norm_w_, merger_norm_b_, merger_fc1_w_, merger_fc1_b_, merger_fc2_w_, merger_fc2_b_;
  at::Tensor inv_freq_;  // [head_dim / 4] float64
};

}  // namespace tq
