// Qwen2.5-VL's attention windows over one image (vision/vision_tower.h): the merged grid cut into
// squares of `side` units from its top left (the last row and column of windows may be smaller),
// the windows taken row by row and each window's units row by row, as transformers'
// get_window_index orders them.
#pragma once
#include <cstdint>
#include <vector>

namespace tq {

struct WindowOrder {
  std::vector<int64_t> units;       // the merged grid's units (row-major indices) in window order
  std::vector<int64_t> window_of;   // per unit in window order: its window
};

WindowOrder window_order(int64_t grid_h, int64_t grid_w, int64_t side);

}  // namespace tq
