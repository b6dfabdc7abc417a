// The vdpbf16ps family of the invariant GEMM (gemm_kernels.h), for bf16 on
// CPUs with AVX-512 BF16: two k per step,
//   y[i][j] = dp(... dp(init[i][j], x[i][0:2], w[j][0:2]) ..., x[i][K-2:K], w[j][K-2:K])
// where dp(acc, a, b) is one lane of vdpbf16ps: acc plus the two exact
// products a[0] b[0] and a[1] b[1] (bf16 products are exact in fp32), with
// the instruction's fixed rounding (round to nearest even; bf16 inputs and
// the fp32 result below the normal range taken as 0). A step is one
// instruction on one lane: its result depends on its own operands only, and
// steps always pair k = 2s with 2s + 1 (an odd K ends with a zero), so a row's
// chain is the same whatever M, its place among the rows, the K blocking or
// the thread split. That is the FMA family's rule with twice the multiply-adds
// per instruction, as oneDNN's bf16 matmuls do.
//
// A tile of 6 rows x 64 columns (24 accumulators, 4 weight vectors and a
// broadcast, of 32 registers) over blocks of 48 rows x 2,048 k: longer k
// blocks reload the accumulators less and let the prefetcher stream a panel's
// weights from L2 (the rates: bench/README.md, "Measurements behind the CPU kernels").
// Vector types are passed by value between helpers inlined into vector_pack only (pack_vectors.h).
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/gemm/gemm_kernels.h"
#include "kernels/cpu/gemm/pack_vectors.h"

#if defined(__x86_64__)
#include "common/x86_intrinsics.h"

namespace tq::gemm {
namespace {

#define TQ_DPBF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

struct DpTile {
  using In = uint16_t;     // bf16 activations
  using Step = uint32_t;   // a row's pair (x[2s], x[2s + 1]): low half, high half
  using Weight = uint32_t;  // a column's pair (w[2s], w[2s + 1]), likewise
  static constexpr int64_t kRows = 6, kVectors = 4, kWidth = kVectors * 16, kDepth = 2, kBlockRows = 48, kBlockK = 2048;
  static constexpr int64_t kStepWeights = kWidth;  // one word per column
  static constexpr bool kInPlace = true;            // a step is a row's pair as stored

  static Step step(const uint16_t* x, int64_t n) { return x[0] | (n > 1 ? static_cast<uint32_t>(x[1]) << 16 : 0u); }

  template <int R, class A>
  TQ_DPBF16 static void tile(int64_t steps, const A& a, const uint32_t* b, const float* init, int64_t ld_init, float* c, int64_t ldc,
                                 const char* prefetch) {
    __m512 acc[R][kVectors];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) acc[r][v] = init ? _mm512_loadu_ps(init + r * ld_init + v * 16) : _mm512_setzero_ps();
    for (int64_t s = 0; s < steps; ++s) {
      if (prefetch) _mm_prefetch(prefetch + s * kPrefetchLine, _MM_HINT_T1);
      __m512bh w[kVectors];
      for (int v = 0; v < kVectors; ++v) w[v] = (__m512bh)_mm512_loadu_si512(b + (s * kVectors + v) * 16);
      for (int r = 0; r < R; ++r) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(a(s, r)));
        for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, w[v]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(c + r * ldc + v * 16, acc[r][v]);
  }
};

TQ_DPBF16 __attribute__((flatten)) void panels(const GemmOperands& j, int64_t a, int64_t b) { run_panels<DpTile>(j, a, b); }

// Panels of 64 columns, [ceil(k / 2)][64] words each: word (s, c) holds
// column c's values at k = 2s (low half) and 2s + 1 (high half), zeros past
// n and k. The plain loops, panel p of them: the reference of pack below.
void plain_panel(const PackSource& w, int64_t n, int64_t k, int64_t p, uint32_t* panel) {
  constexpr int64_t width = DpTile::kWidth;
  const int64_t steps = (k + 1) / 2, cols = std::min(width, n - p * width);
  for (int64_t s = 0; s < steps; ++s) std::fill(panel + s * width + cols, panel + (s + 1) * width, 0u);
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t col = p * width + c;
      panel[s * width + c] = w.at<uint16_t>(col, 2 * s) | (2 * s + 1 < k ? static_cast<uint32_t>(w.at<uint16_t>(col, 2 * s + 1)) << 16 : 0u);
    }
}

void plain_pack(const PackSource& w, int64_t n, int64_t k, void* out) {
  const int64_t steps = (k + 1) / 2;
  for (int64_t p = 0; p < (n + DpTile::kWidth - 1) / DpTile::kWidth; ++p) plain_panel(w, n, k, p, static_cast<uint32_t*>(out) + p * steps * DpTile::kWidth);
}

// plain_pack's bytes in vectors (pack_vectors.h) for the full panels; a last, partial one through plain_panel.
__attribute__((target("avx512f,avx512bw,avx512vl"), flatten)) void vector_pack(const PackSource& w, int64_t n, int64_t k, void* out) {
  constexpr int L = 16;
  using V = pack_vectors::Words<L>::V;
  constexpr int64_t width = DpTile::kWidth;
  const auto* const* rows = reinterpret_cast<const uint16_t* const*>(w.rows);
  const int64_t steps = (k + 1) / 2;
  for (int64_t p = 0; p < (n + width - 1) / width; ++p) {
    uint32_t* panel = static_cast<uint32_t*>(out) + p * steps * width;
    if ((p + 1) * width > n) {
      plain_panel(w, n, k, p, panel);
    } else if (w.along_k) {
      for (int64_t group = 0; group < width; group += L)
        for (int64_t s0 = 0; s0 < steps; s0 += L) {
          V v[L];
          pack_vectors::words_of_rows<L>(rows + p * width + group, s0, k, v);
          for (int64_t i = 0; i < L && s0 + i < steps; ++i) std::memcpy(panel + (s0 + i) * width + group, &v[i], sizeof v[i]);
        }
    } else {
      for (int64_t s = 0; s < steps; ++s) {
        const uint16_t* low = rows[2 * s] + p * width;
        const uint16_t* high = 2 * s + 1 < k ? rows[2 * s + 1] + p * width : nullptr;
        for (int64_t group = 0; group < width; group += L) {
          const V words = pack_vectors::pair_runs<L>(low + group, high ? high + group : nullptr);
          std::memcpy(panel + s * width + group, &words, sizeof words);
        }
      }
    }
  }
}

// The AMX families pack their panels here too, and their model runs on any CPU (the tests).
void pack(const PackSource& w, int64_t n, int64_t k, void* out) {
  static const bool vectors = best_isa() >= Isa::Avx512;  // vector_pack's target
  (vectors ? vector_pack : plain_pack)(w, n, k, out);
}

}  // namespace

Kernel dpbf16_kernel() { return {panels, pack, DpTile::kWidth, DpTile::kDepth, 2, DpTile::kBlockK, plain_pack}; }

}  // namespace tq::gemm
#else
#include <stdexcept>
namespace tq::gemm {
Kernel dpbf16_kernel() { throw std::logic_error("the vdpbf16ps GEMM needs x86-64 with AVX-512 BF16"); }
}  // namespace tq::gemm
#endif
