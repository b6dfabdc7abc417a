#pragma once
// Wall time in milliseconds, as the engine reports its stages' times (steady: never set back).
#include <chrono>

namespace tq {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tq
