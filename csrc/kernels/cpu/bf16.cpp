#include "kernels/cpu/bf16.h"

#include <cstring>

namespace tq {

__attribute__((target_clones("avx512f", "avx2", "default"))) void store_scaled(const float* src, float scale, int64_t n, float* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j] * scale;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void store_scaled(const float* src, float scale, int64_t n, uint16_t* dst) {
  for (int64_t j = 0; j < n; ++j) {
    const float v = src[j] * scale;
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    dst[j] = bf16_bits(bits);
  }
}

}  // namespace tq
