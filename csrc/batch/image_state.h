// A state with images as the batch packs it: what vision/image_prompt.h's
// expand_image_prompt makes of a request's state (each image's pads, M-RoPE
// positions, and the ids the prefix cache hashes, which carry the images'
// keys). Here, below vision/, so that batching needs nothing from the vision tower.
#pragma once
#include <cstdint>
#include <vector>

namespace tq {

struct ImageSpan {
  int64_t offset = 0, tokens = 0;  // the image's pads in the expanded ids
  int64_t grid_h = 0, grid_w = 0;  // merged grid
};

struct ImagePrompt {
  std::vector<int64_t> ids, hash_ids;
  std::vector<int64_t> rope_positions;  // [ids.size(), 3]: t, h, w per token
  std::vector<ImageSpan> spans;         // in the order of the images
  int64_t next_position = 0;            // where text after the state continues
};

}  // namespace tq
