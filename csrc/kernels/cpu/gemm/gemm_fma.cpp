// The FMA family of the invariant GEMM (gemm_kernels.h), in the engine's one
// arithmetic (docs/arithmetic.md):
//   fp32: one k per step, y = fma(x[k], w[k], y) for k = 0 .. K-1;
//   bf16: two k per step, the odd one first: y = fma(x[2s], w[2s],
//         fma(x[2s+1], w[2s+1], y)), an odd K ending with a zero pair member,
//         bf16 values widened exactly and denormals flushed (FlushDenormals)
//         -- vdpbf16ps's lane, bit for bit, so that this family and the
//         vdpbf16ps one (gemm_dpbf16.cpp) give the same bits.
// GCC vector types of the target's register width: the same source compiles to
// zmm (AVX-512), ymm (AVX2) or xmm (generic) registers, chosen by the target
// of the function it is inlined into, and a * b + c contracts to one FMA.
// The generic level takes the FMA instruction where the CPU has it and
// libm's fma (correctly rounded, in software, slow) where it has not. On an
// AVX2 machine and bench-llama's shapes this family runs at oneDNN's fp32 rate
// (docs/engine.md, "Batch invariance").
// Vector types are passed by value between inlined helpers only (see flatten below).
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/gemm/gemm_kernels.h"
#include "kernels/cpu/gemm/pack_vectors.h"

#include <cmath>
#include <type_traits>

#if defined(__x86_64__)
#include "common/x86_intrinsics.h"
#endif

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

// How a lane's multiply-add is done: fused by the compiler (a * b + c
// contracts to the target's FMA), or by libm's fma lane by lane (an x86-64
// without FMA).
enum class Madd { Contracted, Libm };

// A tile is 6 rows by two vectors of columns, its sums held in registers over
// a block of k: 12 accumulators, of 16 registers (AVX2, SSE) or 32 (AVX-512).
// Blocks of 96 rows x 256 k: the packed activations (96 KiB fp32) stay in L2
// while every panel of the thread passes over them; a panel's 256 x 16 slice
// (16 KiB fp32) stays in L1 across the block's 16 tiles. Measured on
// bench-llama shapes (AVX2, 2 threads), see README.
template <int L, typename W, Madd M = Madd::Contracted>
struct FmaTile {
  using F = typename Lanes<L>::F;
  using In = W;
  static constexpr bool kPairs = sizeof(W) == 2;  // bf16: two k per step, odd first
  struct Pair {
    float odd, even;
  };
  using Step = std::conditional_t<kPairs, Pair, float>;
  using Weight = W;
  static constexpr int64_t kRows = 6, kVectors = 2, kWidth = kVectors * L, kDepth = kPairs ? 2 : 1, kBlockRows = 96, kBlockK = 256;
  static constexpr int64_t kStepWeights = kWidth * kDepth;
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
  // A row's next kDepth values (bf16: the pair, the odd member 0 past n).
  static Step step(const W* x, int64_t n) {
    if constexpr (kPairs) return Pair{n > 1 ? widen(x[1]) : 0.0f, widen(x[0])};
    else return widen(*x);
  }
  static F madd(F acc, float s, F w) {
    if constexpr (M == Madd::Libm) {
      for (int l = 0; l < L; ++l) acc[l] = std::fma(s, w[l], acc[l]);
      return acc;
    } else {
      return acc + s * w;
    }
  }
  // acc[r] += one k of row r times the weights at p.
  template <int R>
  static void madd_rows(F (&acc)[R][kVectors], const W* p, const float (&s)[R]) {
    F w[kVectors];
    weights(p, w);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) acc[r][v] = madd(acc[r][v], s[r], w[v]);
  }

  template <int R, class A>
  static void tile(int64_t steps, const A& a, const W* b, const float* init, int64_t ld_init, float* c, int64_t ldc, const char* prefetch) {
    F acc[R][kVectors];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) acc[r][v] = init ? load(init + r * ld_init + v * L) : F{};
    for (int64_t k = 0; k < steps; ++k) {
      if (prefetch) __builtin_prefetch(prefetch + k * kPrefetchLine, 0, 2);
      float s[R];
      if constexpr (kPairs) {
        for (int r = 0; r < R; ++r) s[r] = a(k, r).odd;
        madd_rows<R>(acc, b + k * kStepWeights, s);
        for (int r = 0; r < R; ++r) s[r] = a(k, r).even;
        madd_rows<R>(acc, b + k * kStepWeights + kWidth, s);
      } else {
        for (int r = 0; r < R; ++r) s[r] = a(k, r);
        madd_rows<R>(acc, b + k * kStepWeights, s);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) std::memcpy(c + r * ldc + v * L, &acc[r][v], sizeof(F));
  }
};

// vdpbf16ps reads a bf16 denormal as 0 and writes a result below the normal
// range as 0; the bf16 panels do the same through the SSE control register
// (DAZ and FTZ, this thread, for the call).
class FlushDenormals {
#if defined(__x86_64__)
 public:
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

template <class K>
inline void run_flushed(const GemmOperands& j, int64_t a, int64_t b) {
  if constexpr (K::kPairs) {
    FlushDenormals flush;
    run_panels<K>(j, a, b);
  } else {
    run_panels<K>(j, a, b);
  }
}

#define TQ_FMA_PANELS(name, attributes, L, W, M) \
  attributes __attribute__((flatten)) void name(const GemmOperands& j, int64_t a, int64_t b) { run_flushed<FmaTile<L, W, M>>(j, a, b); }
#if defined(__x86_64__)
TQ_FMA_PANELS(panels_avx512_f32, __attribute__((target("avx512f,avx512bw,avx512vl,fma"))), 16, float, Madd::Contracted)
TQ_FMA_PANELS(panels_avx512_bf16, __attribute__((target("avx512f,avx512bw,avx512vl,fma"))), 16, uint16_t, Madd::Contracted)
TQ_FMA_PANELS(panels_avx2_f32, __attribute__((target("avx2,fma"))), 8, float, Madd::Contracted)
TQ_FMA_PANELS(panels_avx2_bf16, __attribute__((target("avx2,fma"))), 8, uint16_t, Madd::Contracted)
TQ_FMA_PANELS(panels_generic_fma_f32, __attribute__((target("fma"))), 4, float, Madd::Contracted)
TQ_FMA_PANELS(panels_generic_fma_bf16, __attribute__((target("fma"))), 4, uint16_t, Madd::Contracted)
TQ_FMA_PANELS(panels_generic_libm_f32, , 4, float, Madd::Libm)
TQ_FMA_PANELS(panels_generic_libm_bf16, , 4, uint16_t, Madd::Libm)
#else
TQ_FMA_PANELS(panels_generic_fma_f32, , 4, float, Madd::Contracted)
TQ_FMA_PANELS(panels_generic_fma_bf16, , 4, uint16_t, Madd::Contracted)
#endif

// Panels of `width` columns, [k][width] each; bf16 columns go in pairs
// (c, c + width / 2) in one word, for FmaTile::weights, and k in the order the
// steps read it (odd first: 1, 0, 3, 2, ...), K padded to even with zeros.
// The plain loops, panel p of them: the reference of vector_pack_bf16 and the fp32 pack.
template <typename T, int64_t width>
void plain_panel(const PackSource& w, int64_t n, int64_t k, int64_t p, T* dst) {
  constexpr bool pairs = sizeof(T) == 2;
  constexpr int64_t half = width / 2;
  const int64_t padded = pairs ? k + k % 2 : k;
  for (int64_t slot = 0; slot < padded; ++slot) {
    const int64_t kk = pairs ? slot ^ 1 : slot;
    for (int64_t c = 0; c < width; ++c) {
      const int64_t col = p * width + (pairs ? (c % 2) * half + c / 2 : c);
      *dst++ = col < n && kk < k ? w.at<T>(col, kk) : T{};
    }
  }
}

template <typename T, int64_t width>
void plain_pack(const PackSource& w, int64_t n, int64_t k, void* out) {
  const int64_t padded = sizeof(T) == 2 ? k + k % 2 : k;
  for (int64_t p = 0; p < (n + width - 1) / width; ++p) plain_panel<T, width>(w, n, k, p, static_cast<T*>(out) + p * padded * width);
}

// plain_pack's bf16 bytes in vectors of L words (pack_vectors.h), for the full panels; a last, partial one through
// plain_panel.
template <int L>
inline void vector_pack_bf16(const PackSource& w, int64_t n, int64_t k, void* out) {
  using V = typename pack_vectors::Words<L>::V;
  constexpr int64_t width = 2 * L;
  const auto* const* rows = reinterpret_cast<const uint16_t* const*>(w.rows);
  const int64_t steps = (k + 1) / 2, padded = 2 * steps;
  for (int64_t p = 0; p < (n + width - 1) / width; ++p) {
    uint16_t* panel = static_cast<uint16_t*>(out) + p * padded * width;
    if ((p + 1) * width > n) {
      plain_panel<uint16_t, width>(w, n, k, p, panel);
    } else if (w.along_k) {
      // A word of column c's row (k = 2s, 2s + 1) and one of column L + c's, regrouped: slot 2s holds k = 2s + 1
      // (odd first) and slot 2s + 1 k = 2s, each word's low half column c and its high half column L + c.
      const uint16_t* const* low = rows + p * width;
      const uint16_t* const* high = low + L;
      for (int64_t s0 = 0; s0 < steps; s0 += L) {
        V a[L], b[L];
        pack_vectors::words_of_rows<L>(low, s0, k, a);
        pack_vectors::words_of_rows<L>(high, s0, k, b);
        for (int64_t i = 0; i < L && s0 + i < steps; ++i) {
          const V odd = a[i] >> 16 | (b[i] & 0xffff0000u), even = (a[i] & 0xffffu) | b[i] << 16;
          std::memcpy(panel + 2 * (s0 + i) * width, &odd, sizeof odd);
          std::memcpy(panel + (2 * (s0 + i) + 1) * width, &even, sizeof even);
        }
      }
    } else {
      for (int64_t slot = 0; slot < padded; ++slot) {
        const int64_t kk = slot ^ 1;
        const V words = kk < k ? pack_vectors::pair_runs<L>(rows[kk] + p * width, rows[kk] + p * width + L) : V{};
        std::memcpy(panel + slot * width, &words, sizeof words);
      }
    }
  }
}

#define TQ_FMA_PACK(name, attributes, L) \
  attributes __attribute__((flatten)) void name(const PackSource& w, int64_t n, int64_t k, void* dst) { vector_pack_bf16<L>(w, n, k, dst); }
#if defined(__x86_64__)
TQ_FMA_PACK(pack_avx512_bf16, __attribute__((target("avx512f,avx512bw,avx512vl"))), 16)
TQ_FMA_PACK(pack_avx2_bf16, __attribute__((target("avx2"))), 8)
#endif
TQ_FMA_PACK(pack_generic_bf16, , 4)

template <int L>
Kernel kernel_of(PanelsFn f32, PanelsFn bf16, PackFn pack_bf16, bool is_bf16) {
  constexpr int64_t width = FmaTile<L, float>::kWidth, block_k = FmaTile<L, float>::kBlockK;
  if (is_bf16) return {bf16, pack_bf16, width, FmaTile<L, uint16_t>::kDepth, 2, block_k, plain_pack<uint16_t, width>};
  return {f32, plain_pack<float, width>, width, 1, 4, block_k};
}

}  // namespace

Kernel fma_kernel(Isa isa, bool bf16) {
#if defined(__x86_64__)
  if (isa >= Isa::Avx512) return kernel_of<16>(panels_avx512_f32, panels_avx512_bf16, pack_avx512_bf16, bf16);
  if (isa == Isa::Avx2) return kernel_of<8>(panels_avx2_f32, panels_avx2_bf16, pack_avx2_bf16, bf16);
  if (!__builtin_cpu_supports("fma")) return generic_libm_fma_kernel(bf16);
#endif
  return kernel_of<4>(panels_generic_fma_f32, panels_generic_fma_bf16, pack_generic_bf16, bf16);
}

Kernel generic_libm_fma_kernel(bool bf16) {
#if defined(__x86_64__)
  return kernel_of<4>(panels_generic_libm_f32, panels_generic_libm_bf16, pack_generic_bf16, bf16);
#else
  return kernel_of<4>(panels_generic_fma_f32, panels_generic_fma_bf16, pack_generic_bf16, bf16);
#endif
}

}  // namespace tq::gemm
