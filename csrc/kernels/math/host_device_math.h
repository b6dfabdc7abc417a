// Arithmetic compiled for both the host and CUDA devices, each operation an
// IEEE fp32 multiply or add rounded on its own, so that a kernel and its CPU
// twin written with these functions give the same bits: the label readout
// (label_readout_math.h), the attention merge (attention_merge_math.h) and the
// fused row kernels (row_kernels_math.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TQ_HOST_DEVICE __host__ __device__
#else
#define TQ_HOST_DEVICE
#endif

namespace tq::exact {

TQ_HOST_DEVICE inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// A fused multiply-add would round once where the other implementation rounds
// twice. The device has explicitly rounded intrinsics; on the host the product
// passes through an empty asm statement, which the compiler cannot see into and
// so cannot fuse with the add that follows (a GCC optimize pragma does not
// survive inlining into a caller compiled with contraction on; test/kernels/cuda.test.ts).
TQ_HOST_DEVICE inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  float product = a * b;
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(product));
#elif defined(__aarch64__)
  __asm__("" : "+w"(product));
#else
  volatile float opaque = product;
  product = opaque;
#endif
  return product;
#endif
}

TQ_HOST_DEVICE inline float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// The float with these bits, and the bits of a float.
TQ_HOST_DEVICE inline float from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}
TQ_HOST_DEVICE inline uint32_t to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

// bf16 (the upper half of an fp32) widened exactly.
TQ_HOST_DEVICE inline float widen(uint16_t bits) { return from_bits(static_cast<uint32_t>(bits) << 16); }
TQ_HOST_DEVICE inline float widen(float x) { return x; }

// fp32 to bf16 bits, rounded to nearest even, NaN as 0x7fc0: what ATen's conversion gives.
TQ_HOST_DEVICE inline uint16_t narrow_bf16(float x) {
  const uint32_t bits = to_bits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Two bf16 elements (4-byte aligned) as one word, the first in its low half: one load on the device.
TQ_HOST_DEVICE inline uint32_t load_word(const uint16_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
#endif
}

// Stores an fp32 result as T: fp32 as it is, bf16 (uint16_t bits) rounded.
TQ_HOST_DEVICE inline void store(float x, float* to) { *to = x; }
TQ_HOST_DEVICE inline void store(float x, uint16_t* to) { *to = narrow_bf16(x); }

}  // namespace tq::exact
