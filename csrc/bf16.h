// fp32 -> bf16 by the bits, rounding to nearest even as at::BFloat16 does.
// Plain integer arithmetic on a value (no bit cast inside), so the loops that
// call it still vectorize.
#pragma once
#include <cstdint>

namespace tq {

inline uint16_t bf16_bits(uint32_t fp32_bits) { return static_cast<uint16_t>((fp32_bits + 0x7fffu + ((fp32_bits >> 16) & 1u)) >> 16); }

}  // namespace tq
