// Qwen2-VL's and Qwen2.5-VL's vision tower: a ViT whose patch embedding is one linear map of a
// 14x14x2x3 patch (the checkpoint's Conv3d, stride = kernel), 2D RoPE (the
// first half of each head's rotary frequencies driven by the patch's row, the
// second by its column), bidirectional attention within one image, pre-norm
// LayerNorm blocks with a QuickGELU MLP, then the PatchMerger: LayerNorm, each
// 2x2 group of patches concatenated, and an MLP (exact GELU) into the text
// model's hidden size. Its matmuls and attention are the text model's
// LayerKernels' in the compute dtype (the engine's CPU kernels, or ATen's on
// CUDA): attention is the engine's one visibility rule with every patch at the
// same position in one segment, so each sees the whole image. The residual
// stream, LayerNorms, RoPE and activations are fp32. On the engine's kernels
// the tower runs faster than on ATen's in fp32, compute-bound either way (bench/README.md,
// "Measurements behind the CPU kernels"); the kernels also give the tower the
// text model's batch invariance and dtype.
//
// Qwen2.5-VL's blocks differ in three ways: RMSNorm for the LayerNorms (the
// merger's too), a SwiGLU MLP (gate, up, down, with biases) for the QuickGELU
// one, and attention within windows of window_size pixels (square groups of
// merged units, cut from the image's top left; the last row and column of
// windows may be smaller) in every block but the fullatt_block_indexes ones.
// As transformers does, the patches are put in window order (windows row by
// row, each window's units row by row) before the blocks, so that a window's
// patches are consecutive and its attention reads its own keys only, and the
// merger's rows are put back in the image's order after it.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "kernels/layer_kernels.h"
#include "model/checkpoint.h"
#include "vision/patches.h"

namespace tq {

class VisionTower {
 public:
  // `kernels` (the text model's) outlive the tower.
  VisionTower(const Checkpoint& ckpt, const LayerKernels& kernels, at::ScalarType dtype);
  // One image's embeddings, [N / merge^2, text hidden] fp32 on the device, one row per
  // image token in the prompt's order (merged grid rows, then columns).
  at::Tensor embed(const ImagePatches& patches) const;
  const VisionConfig& config() const { return config_; }

 private:
  struct Block {
    at::Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // fp32; the biases undefined for Qwen2.5-VL's RMSNorm
    std::unique_ptr<Linear> qkv, proj;
    std::unique_ptr<Linear> fc1, fc2;         // Qwen2-VL's MLP
    std::unique_ptr<Linear> gate, up, down;   // Qwen2.5-VL's
    bool windowed = false;                    // attends within its window (Qwen2.5-VL)
  };
  // Bidirectional attention over one image's patches; x [N, E] fp32 (normed), returns proj's output [N, E] fp32.
  at::Tensor attention(const Block& b, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const StepAttention& attend) const;
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const;
  at::Tensor mlp(const Block& b, const at::Tensor& x) const;

  VisionConfig config_;
  const LayerKernels& kernels_;
  at::ScalarType dtype_;
  std::unique_ptr<Linear> patch_embed_;  // [embed_dim, C * T * ps * ps], no bias
  std::vector<Block> blocks_;
  at::Tensor merger_norm_w_, merger_norm_b_;
  std::unique_ptr<Linear> merger_fc1_, merger_fc2_;
  at::Tensor inv_freq_;  // [head_dim / 4] float64
};

}  // namespace tq
