// The batch-invariant GEMM's micro-kernel families behind invariant_gemm.h,
// and the loops they share (run_panels). Every output is one fixed chain of
// steps over k, in k order, started from its initial value (bias, residual or
// 0), so a row's result depends on that row and the weights only: not on how
// many rows are computed with it, where it sits among them, how K is blocked
// or how the columns are split between threads.
//   gemm_fma.cpp:    one k per step, y = fma(x[k], w[k], y), fp32 products
//                    (bf16 widened exactly); AVX-512, AVX2 or portable vectors.
//   gemm_dpbf16.cpp: two k per step, vdpbf16ps (AVX-512 BF16), bf16 pairs.
// Vectors run along the output columns (one lane = one column), so no chain
// is ever split across lanes. Weights are packed once into panels of `width`
// columns, [steps of k][width * depth] each, zero-padded.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace tq::gemm {

struct Job {
  const void* x;       // [M, K] activations in the weights' dtype, rows lda apart
  const void* panels;  // packed weights
  float* out;          // [M, N], rows ldc apart
  const float* bias;   // [panels * width] zero-padded, or null
  int64_t m, k, n, lda, ldc;
  bool accumulate;
};

using PanelsFn = void (*)(const Job&, int64_t p_begin, int64_t p_end);
// Packs w, n x k with element (j, kk) at w[j * stride_n + kk * stride_k].
using PackFn = void (*)(const void* w, int64_t n, int64_t k, int64_t stride_n, int64_t stride_k, void* dst);

// One family at one level for one dtype: its panel layout and its loops.
struct Kernel {
  PanelsFn run;          // the panels [p_begin, p_end) of a job, on the calling thread
  PackFn pack;
  int64_t width;         // columns per panel
  int64_t depth;         // k per step
  int64_t element_bytes;  // of the packed weights
  int64_t panels(int64_t n) const { return (n + width - 1) / width; }
  size_t packed_bytes(int64_t n, int64_t k) const {
    return static_cast<size_t>(panels(n) * ((k + depth - 1) / depth) * width * depth * element_bytes);
  }
};

Kernel fma_kernel(Isa isa, bool bf16);
Kernel dpbf16_kernel();  // needs Isa::Avx512Bf16

// The loops every family shares: blocks of rows, then of k; within them, the
// thread's panels, then tiles of K::kRows rows. A remainder of under half a
// block joins the last block: each block streams all the thread's weights
// again, and a warm question's 49 rows in blocks of 48 and 1 streamed them
// twice for one more row. A block's activations are packed per thread,
// interleaved so that a tile reads its step's values together (rows past M
// are 0). A micro-kernel K provides:
//   In, Step, Weight: activation, packed activation (one row, one step) and
//     packed weight element types; kRows, kWidth, kDepth, kBlockRows, kBlockK
//     (a multiple of kDepth, so that steps never straddle blocks), kStepWeights
//     (Weight elements of one step of one panel);
//   Step step(const In* x, int64_t n): a row's next kDepth values, the last
//     past n zero;
//   tile(steps, a, b, init, ld_init, c, ldc): c = init (ld_init 0: one row for
//     all; null: 0) + the tile's chains over `steps` steps.
template <class K>
inline void run_panels(const Job& job, int64_t p_begin, int64_t p_end) {
  using Step = typename K::Step;
  constexpr int64_t rows_per_tile = K::kRows, width = K::kWidth, depth = K::kDepth;
  const auto* x = static_cast<const typename K::In*>(job.x);
  const auto* panels = static_cast<const typename K::Weight*>(job.panels);
  const int64_t steps_in_k = (job.k + depth - 1) / depth;
  thread_local std::vector<Step> packed;  // [tiles][steps][kRows], this thread's copy
  constexpr int64_t max_block_rows = K::kBlockRows + K::kBlockRows / 2;
  packed.resize(static_cast<size_t>((max_block_rows + rows_per_tile) * K::kBlockK / depth));
  for (int64_t m0 = 0, mc; m0 < job.m; m0 += mc) {
    mc = job.m - m0 < max_block_rows ? job.m - m0 : K::kBlockRows;
    const int64_t tiles = (mc + rows_per_tile - 1) / rows_per_tile;
    for (int64_t k0 = 0; k0 < job.k; k0 += K::kBlockK) {
      const int64_t kc = std::min(K::kBlockK, job.k - k0), steps = (kc + depth - 1) / depth;
      for (int64_t t = 0; t < tiles; ++t)
        for (int64_t r = 0; r < rows_per_tile; ++r) {
          const int64_t row = m0 + t * rows_per_tile + r;
          Step* dst = packed.data() + t * steps * rows_per_tile + r;
          const auto* src = x + row * job.lda + k0;
          for (int64_t s = 0; s < steps; ++s) dst[s * rows_per_tile] = row < job.m ? K::step(src + s * depth, kc - s * depth) : Step{};
        }
      const bool fresh = k0 == 0 && !job.accumulate;
      for (int64_t p = p_begin; p < p_end; ++p) {
        const auto* b = panels + (p * steps_in_k + k0 / depth) * K::kStepWeights;
        const int64_t col0 = p * width, cols = std::min(width, job.n - col0);
        const float* bias = fresh && job.bias ? job.bias + col0 : nullptr;
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t row0 = m0 + t * rows_per_tile, rows = std::min(rows_per_tile, job.m - row0);
          const Step* a = packed.data() + t * steps * rows_per_tile;
          float* c = job.out + row0 * job.ldc + col0;
          if (rows == rows_per_tile && cols == width) {
            K::tile(steps, a, b, fresh ? bias : c, fresh ? 0 : job.ldc, c, job.ldc);
            continue;
          }
          // Partial tiles (the last rows or columns) go through a full-size copy.
          alignas(64) float edge[rows_per_tile][width];
          if (!fresh) {
            std::memset(edge, 0, sizeof edge);
            for (int64_t r = 0; r < rows; ++r) std::memcpy(edge[r], c + r * job.ldc, cols * sizeof(float));
          }
          K::tile(steps, a, b, fresh ? bias : &edge[0][0], fresh ? 0 : width, &edge[0][0], width);
          for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * job.ldc, edge[r], cols * sizeof(float));
        }
      }
    }
  }
}

}  // namespace tq::gemm
