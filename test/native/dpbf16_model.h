// A plain model of vdpbf16ps, the instruction of the invariant GEMM's bf16
// family at avx512-bf16 (csrc/kernels/cpu/gemm/gemm_dpbf16.cpp), as Intel's manual
// defines one lane of it: the pair's second products added first, then its
// first, each a fused multiply-add in fp32 rounded to nearest even, with bf16
// inputs and accumulator below the normal range read as 0 and a result below
// it written as 0. It runs on any CPU, so that the checks of what must not
// change with the vdpbf16ps pairs (test/native/pairs_check.cpp) run on CPUs
// without the instruction too. Only its determinism and its pairing matter to
// them: an AMD core may round a pair differently (in one step, say), which
// makes the same pairs equally invariant and other pairs equally different.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm/gemm_kernels.h"

namespace tq::gemm {

namespace dpbf16_model {

inline float flushed(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
inline float widened(uint32_t bf16) {
  const uint32_t u = bf16 << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return flushed(f);
}

// One lane of one instruction: acc plus the pairs (x low, w low) and (x high, w high).
inline float lane(float acc, uint32_t x, uint32_t w) {
  acc = flushed(std::fma(widened(x >> 16), widened(w >> 16), flushed(acc)));
  return flushed(std::fma(widened(x & 0xffffu), widened(w & 0xffffu), acc));
}

// The family's tile (gemm_dpbf16.cpp's DpTile: the same panels, steps and blocks), lane by lane.
struct Tile {
  using In = uint16_t;
  using Step = uint32_t;
  using Weight = uint32_t;
  static constexpr int64_t kRows = 6, kWidth = 64, kDepth = 2, kBlockRows = 48, kBlockK = 2048, kStepWeights = kWidth;
  static constexpr bool kInPlace = true;
  static Step step(const uint16_t* x, int64_t n) { return x[0] | (n > 1 ? static_cast<uint32_t>(x[1]) << 16 : 0u); }

  template <int R, class A>
  static void tile(int64_t steps, const A& a, const uint32_t* b, const float* init, int64_t ld_init, float* c, int64_t ldc, const char*) {
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < kWidth; ++j) {
        float acc = init ? init[r * ld_init + j] : 0.0f;
        for (int64_t s = 0; s < steps; ++s) acc = lane(acc, a(s, r), b[s * kWidth + j]);
        c[r * ldc + j] = acc;
      }
  }
};

inline void panels(const GemmOperands& j, int64_t a, int64_t b) { run_panels<Tile>(j, a, b); }

}  // namespace dpbf16_model

// The model as a family: vdpbf16ps's panels (its pack), the model's arithmetic.
inline Kernel dpbf16_model_kernel() {
  Kernel k = dpbf16_kernel();
  k.run = dpbf16_model::panels;
  return k;
}

}  // namespace tq::gemm
