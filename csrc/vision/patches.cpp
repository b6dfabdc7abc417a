#include "vision/patches.h"

#include "common/errors.h"

namespace tq {

std::pair<int64_t, int64_t> merged_grid(const at::Tensor& rgb, const VisionConfig& v) {
  const int64_t unit = v.patch_size * v.spatial_merge_size;
  if (rgb.dim() != 3 || rgb.size(2) != 3 || rgb.scalar_type() != at::kByte)
    throw EngineError(code::kBadRequest, "an image must be raw RGB bytes, [height, width, 3]");
  const int64_t H = rgb.size(0), W = rgb.size(1);
  if (H == 0 || W == 0 || H % unit != 0 || W % unit != 0)
    throw EngineError(code::kBadRequest, "an image is " + std::to_string(W) + "x" + std::to_string(H) + "; its sides must be positive multiples of " +
                                             std::to_string(unit) + " (the preprocessing recipe's smart_resize)");
  return {H / unit, W / unit};
}

ImagePatches image_patches(const at::Tensor& rgb, const VisionConfig& v) {
  merged_grid(rgb, v);
  const int64_t H = rgb.size(0), W = rgb.size(1);
  // OPENAI_CLIP_MEAN / OPENAI_CLIP_STD, as Qwen2VLImageProcessor uses them.
  const auto mean = at::tensor({0.48145466, 0.4578275, 0.40821073}, at::kDouble);
  const auto std = at::tensor({0.26862954, 0.26130258, 0.27577711}, at::kDouble);
  auto x = ((rgb.to(at::kDouble) / 255.0 - mean) / std).to(at::kFloat).permute({2, 0, 1});  // [C, H, W]
  const int64_t ps = v.patch_size, m = v.spatial_merge_size, T = v.temporal_patch_size, C = 3;
  const int64_t gh = H / ps, gw = W / ps;
  auto frames = x.unsqueeze(0).expand({T, C, H, W});
  // (T, C, gh/m, m, ps, gw/m, m, ps) -> (gh/m, gw/m, m, m, C, T, ps, ps)
  auto p = frames.reshape({T, C, gh / m, m, ps, gw / m, m, ps}).permute({2, 5, 3, 6, 1, 0, 4, 7});
  ImagePatches out;
  out.values = p.reshape({gh * gw, C * T * ps * ps}).contiguous();
  // Row of patch (bh, bw, mh, mw) is bh*m + mh; column bw*m + mw.
  auto bh = at::arange(gh / m, at::kLong).view({gh / m, 1, 1, 1}), bw = at::arange(gw / m, at::kLong).view({1, gw / m, 1, 1});
  auto mh = at::arange(m, at::kLong).view({1, 1, m, 1}), mw = at::arange(m, at::kLong).view({1, 1, 1, m});
  out.rows = (bh * m + mh).expand({gh / m, gw / m, m, m}).reshape({-1}).contiguous();
  out.cols = (bw * m + mw).expand({gh / m, gw / m, m, m}).reshape({-1}).contiguous();
  out.grid_h = gh;
  out.grid_w = gw;
  return out;
}

}  // namespace tq
