// fp32 -> bf16 by the bits, rounding to nearest even as at::BFloat16 does, and
// the row store the kernels share to write results in the compute dtype.
#pragma once
#include <cstdint>
#include <cstring>

namespace tq {

// Plain integer arithmetic on a value (no bit cast inside), so the loops that
// call it still vectorize.
inline uint16_t bf16_bits(uint32_t fp32_bits) { return static_cast<uint16_t>((fp32_bits + 0x7fffu + ((fp32_bits >> 16) & 1u)) >> 16); }

// One value, for setting up and checking (the native checks); the kernels call bf16_bits in their loops.
inline uint16_t bf16_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16_bits(u);
}

// dst[j] = src[j] * scale for j < n, in fp32 or bf16 (a scale of 1 is exact).
void store_scaled(const float* src, float scale, int64_t n, float* dst);
void store_scaled(const float* src, float scale, int64_t n, uint16_t* dst);

}  // namespace tq
