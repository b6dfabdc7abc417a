// An image as Qwen2-VL's ViT reads it. The server hands over sharp's raw RGB
// at a size the recipe already chose (src/images/preprocess.ts: sides multiples
// of 28); here it is rescaled to [0, 1], normalised with CLIP's mean and std,
// doubled in time (a still image is two identical frames) and cut into
// 14x14x2x3 patches in the order the merger reads them: 2x2 groups of
// neighbouring patches, the groups row by row (transformers'
// Qwen2VLImageProcessor: reshape + transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)).
#pragma once
#include <ATen/ATen.h>

#include <utility>

#include "model/model_config.h"

namespace tq {

struct ImagePatches {
  at::Tensor values;      // [N, C * T * ps * ps] fp32: channel, then frame, then pixel row, then column
  at::Tensor rows, cols;  // [N] int64: each patch's place in the patch grid (for the ViT's 2D RoPE)
  int64_t grid_h = 0, grid_w = 0;  // in patches
};

// Throws BAD_REQUEST unless rgb is [H, W, 3] uint8 with H and W positive multiples of
// patch_size * spatial_merge_size; returns the merged grid {H, W} / that unit.
std::pair<int64_t, int64_t> merged_grid(const at::Tensor& rgb, const VisionConfig& v);

ImagePatches image_patches(const at::Tensor& rgb, const VisionConfig& v);

}  // namespace tq
