// The FMA family of the invariant GEMM (gemm_kernels.h): one k per step,
//   y[i][j] = fma(x[i][K-1], w[j][K-1], ... fma(x[i][0], w[j][0], init[i][j]))
// in fp32, bf16 values widened exactly (bf16's bits are the high half of the
// fp32's), so a bf16 product is exact and only the accumulation rounds. GCC
// vector types of the target's register width: the same source compiles to
// zmm (AVX-512), ymm (AVX2) or xmm (portable) registers, chosen by the target
// of the function it is inlined into. (The portable build, for CPUs without
// FMA, has separate multiplies and adds: another fixed chain, invariant all
// the same.) On an AVX2 machine and bench-llama's shapes this family runs at
// oneDNN's fp32 rate (docs/engine.md, "Batch invariance").
#include "kernels/cpu/gemm_kernels.h"

// Vector types are passed by value between inlined helpers only (see flatten below).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tq::gemm {
namespace {

template <int L>
struct Lanes;
template <>
struct Lanes<4> {
  typedef float F __attribute__((vector_size(16)));
  typedef uint32_t U __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef uint32_t U __attribute__((vector_size(64)));
};

inline float widen(float x) { return x; }
inline float widen(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A tile is 6 rows by two vectors of columns, its sums held in registers over
// a block of k: 12 accumulators, of 16 registers (AVX2, SSE) or 32 (AVX-512).
// Blocks of 96 rows x 256 k: the packed activations (96 KiB fp32) stay in L2
// while every panel of the thread passes over them; a panel's 256 x 16 slice
// (16 KiB fp32) stays in L1 across the block's 16 tiles. Measured on
// bench-llama shapes (AVX2, 2 threads), see README.
template <int L, typename W>
struct FmaTile {
  using F = typename Lanes<L>::F;
  using In = W;
  using Step = float;
  using Weight = W;
  static constexpr int64_t kRows = 6, kVectors = 2, kWidth = kVectors * L, kDepth = 1, kBlockRows = 96, kBlockK = 256;
  static constexpr int64_t kStepWeights = kWidth;
  static constexpr bool kInPlace = false;  // packed: see gemm_kernels.h

  static F load(const float* p) {
    F v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  // A tile's two weight vectors for one k. fp32: two loads. bf16: one load of
  // 2L values packed in pairs (column c in the low half of word c, column L + c
  // in the high half), widened exactly by a shift and a mask: faster than
  // widening two 8-value loads, and as fast as fp32 (bench/README.md).
  static void weights(const float* p, F (&w)[2]) {
    w[0] = load(p);
    w[1] = load(p + L);
  }
  static void weights(const uint16_t* p, F (&w)[2]) {
    typename Lanes<L>::U pairs;
    std::memcpy(&pairs, p, sizeof pairs);
    w[0] = (F)(pairs << 16);
    w[1] = (F)(pairs & 0xffff0000u);
  }
  static Step step(const W* x, int64_t) { return widen(*x); }

  template <int R, class A>
  static void tile(int64_t steps, const A& a, const W* b, const float* init, int64_t ld_init, float* c, int64_t ldc, const char* prefetch) {
    F acc[R][kVectors];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) acc[r][v] = init ? load(init + r * ld_init + v * L) : F{};
    for (int64_t k = 0; k < steps; ++k) {
      if (prefetch) __builtin_prefetch(prefetch + k * kPrefetchLine, 0, 2);
      F w[kVectors];
      weights(b + k * kWidth, w);
      for (int r = 0; r < R; ++r) {
        const float s = a(k, r);
        for (int v = 0; v < kVectors; ++v) acc[r][v] += s * w[v];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) std::memcpy(c + r * ldc + v * L, &acc[r][v], sizeof(F));
  }
};

#if defined(__x86_64__)
#define TQ_FMA_PANELS(name, flags, L, W) \
  __attribute__((target(flags), flatten)) void name(const Job& j, int64_t a, int64_t b) { run_panels<FmaTile<L, W>>(j, a, b); }
TQ_FMA_PANELS(panels_avx512_f32, "avx512f,avx512bw,avx512vl,fma", 16, float)
TQ_FMA_PANELS(panels_avx512_bf16, "avx512f,avx512bw,avx512vl,fma", 16, uint16_t)
TQ_FMA_PANELS(panels_avx2_f32, "avx2,fma", 8, float)
TQ_FMA_PANELS(panels_avx2_bf16, "avx2,fma", 8, uint16_t)
#endif
__attribute__((flatten)) void panels_portable_f32(const Job& j, int64_t a, int64_t b) { run_panels<FmaTile<4, float>>(j, a, b); }
__attribute__((flatten)) void panels_portable_bf16(const Job& j, int64_t a, int64_t b) { run_panels<FmaTile<4, uint16_t>>(j, a, b); }

// Panels of `width` columns, [k][width] each; bf16 columns go in pairs
// (c, c + width / 2) in one word, for FmaTile::weights.
template <typename T, int64_t width>
void pack(const void* src, int64_t n, int64_t k, int64_t stride_n, int64_t stride_k, void* out) {
  const T* w = static_cast<const T*>(src);
  T* dst = static_cast<T*>(out);
  constexpr int64_t half = width / 2;
  for (int64_t p = 0; p < (n + width - 1) / width; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t c = 0; c < width; ++c) {
        const int64_t col = p * width + (sizeof(T) == 2 ? (c % 2) * half + c / 2 : c);
        *dst++ = col < n ? w[col * stride_n + kk * stride_k] : T{};
      }
}

template <int L>
Kernel kernel_of(PanelsFn f32, PanelsFn bf16, bool is_bf16) {
  constexpr int64_t width = FmaTile<L, float>::kWidth, block_k = FmaTile<L, float>::kBlockK;
  if (is_bf16) return {bf16, pack<uint16_t, width>, width, 1, 2, block_k};
  return {f32, pack<float, width>, width, 1, 4, block_k};
}

}  // namespace

Kernel fma_kernel(Isa isa, bool bf16) {
#if defined(__x86_64__)
  if (isa >= Isa::Avx512) return kernel_of<16>(panels_avx512_f32, panels_avx512_bf16, bf16);
  if (isa == Isa::Avx2) return kernel_of<8>(panels_avx2_f32, panels_avx2_bf16, bf16);
#endif
  return kernel_of<4>(panels_portable_f32, panels_portable_bf16, bf16);
}

}  // namespace tq::gemm
