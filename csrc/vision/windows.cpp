#include "vision/windows.h"

#include <algorithm>

namespace tq {

WindowOrder window_order(int64_t grid_h, int64_t grid_w, int64_t side) {
  WindowOrder out;
  int64_t window = 0;
  for (int64_t top = 0; top < grid_h; top += side)
    for (int64_t left = 0; left < grid_w; left += side, ++window) {
      const size_t first = out.units.size();
      for (int64_t r = top; r < std::min(grid_h, top + side); ++r)
        for (int64_t c = left; c < std::min(grid_w, left + side); ++c) out.units.push_back(r * grid_w + c);
      out.window_of.insert(out.window_of.end(), out.units.size() - first, window);
    }
  return out;
}

}  // namespace tq
