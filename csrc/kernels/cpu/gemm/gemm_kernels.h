// The batch-invariant GEMM's micro-kernel families behind invariant_gemm.h,
// and the loops they share (run_panels). Every output is one fixed chain of
// steps over k, in k order, started from its initial value (bias, residual or
// 0), so a row's result depends on that row and the weights only: not on how
// many rows are computed with it, where it sits among them, how K is blocked
// or how the columns are split between threads.
//   gemm_fma.cpp:    fp32, one k per step, y = fma(x[k], w[k], y); bf16, two
//                    k per step as vdpbf16ps adds them; AVX-512, AVX2 or
//                    generic vectors.
//   gemm_dpbf16.cpp: bf16, two k per step, vdpbf16ps (AVX-512 BF16).
// Both bf16 families compute the same chains: the same bits (docs/arithmetic.md).
// Vectors run along the output columns (one lane = one column), so no chain
// is ever split across lanes. Weights are packed once into panels of `width`
// columns, [steps of k][width * depth] each, zero-padded.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/isa.h"

namespace tq::gemm {

struct GemmOperands {
  const void* x;       // [M, K] activations in the weights' dtype, rows lda apart
  const void* panels;  // packed weights
  void* out;           // [M, N], rows ldc apart: fp32, or bf16 where out_bf16
  const float* bias;   // [panels * width] zero-padded, or null
  int64_t m, k, n, lda, ldc;
  bool accumulate;     // onto out (fp32 only)
  bool out_bf16 = false;  // each output rounded to bf16 (to nearest even, as at::BFloat16) when complete
};

using PanelsFn = void (*)(const GemmOperands&, int64_t p_begin, int64_t p_end);
// The n x k matrix a pack reads, as rows of contiguous values wherever each lies: along k (row j holds column j's k
// values: a linear's weights, attention's keys) or along n (row kk holds k-index kk's n values: attention's values).
// Attention's rows are where the KV cache holds them, in the item's key order.
struct PackSource {
  const void* const* rows;
  bool along_k;
  // Element (j, kk) of a T matrix.
  template <typename T>
  T at(int64_t j, int64_t kk) const {
    return along_k ? static_cast<const T*>(rows[j])[kk] : static_cast<const T*>(rows[kk])[j];
  }
};
using PackFn = void (*)(const PackSource& w, int64_t n, int64_t k, void* dst);
// The rows of a matrix stored whole: `count` of them, `stride_bytes` apart from base.
inline std::vector<const void*> rows_every(const void* base, int64_t count, int64_t stride_bytes) {
  std::vector<const void*> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) rows[static_cast<size_t>(i)] = static_cast<const char*>(base) + i * stride_bytes;
  return rows;
}

// One family at one level for one dtype: its panel layout and its loops.
struct Kernel {
  PanelsFn run;          // the panels [p_begin, p_end) of a job, on the calling thread
  PackFn pack;
  int64_t width;         // columns per panel
  int64_t depth;         // k per step
  int64_t element_bytes;  // of the packed weights
  int64_t block_k;        // k per block: a bf16 output of a longer K widens the block
  PackFn plain_pack = nullptr;  // pack's plain loops, the same bytes, where pack is a vector form of them (the checks' reference)
  int64_t panels(int64_t n) const { return (n + width - 1) / width; }
  size_t packed_bytes(int64_t n, int64_t k) const {
    return static_cast<size_t>(panels(n) * ((k + depth - 1) / depth) * width * depth * element_bytes);
  }
};

// A tile given a `prefetch` address asks for one cache line of it per step:
// line s at prefetch + s * kPrefetchLine (run_panels says why).
constexpr int64_t kPrefetchLine = 64;

Kernel fma_kernel(Isa isa, bool bf16);
// The generic level as a CPU without FMA runs it (fp32 through libm's fma),
// so that test/native/gemm_check.cpp checks it on any CPU.
Kernel generic_libm_fma_kernel(bool bf16);
Kernel dpbf16_kernel();  // needs Isa::Avx512Bf16
// bf16 on AMX tiles (gemm_amx_bf16.cpp): the native arithmetic of AMX Xeons, its own bits, batch-invariant; on the
// tiles where the CPU has AMX-BF16 (and Linux grants tile state), or on a model of them anywhere (the tests).
Kernel amx_bf16_kernel();
Kernel amx_bf16_model_kernel();
bool cpu_has_amx_bf16();
// Whether the native bf16 arithmetic can run here: on the tiles, or on their model where the test instrument
// TQ_AMX_MODEL=1 asks for it (a CPU without AMX, for the tests of the option's path).
bool native_bf16_available();

// A tile's activations, step s of row r, as a micro-kernel reads them: packed
// by run_panels ([steps][kRows], rows past M zero) ...
template <class K>
struct PackedSteps {
  const typename K::Step* a;
  typename K::Step operator()(int64_t s, int r) const { return a[s * K::kRows + r]; }
};
// ... or in place, for a family whose step is a row's next kDepth values as
// they are stored (K::kInPlace), where K has no partial last step. For the
// vdpbf16ps family (bf16 pairs) packing cost 8% of its time in a prefill
// (perf: each thread packed every block again, element by element), and a
// broadcast reads a step from the row as cheaply as from the copy. The fp32
// FMA family packs: in place, attention's rows of probabilities (4 KiB apart
// for 1,024 keys) took the fp32 prefill from 2.8 to 3.3 s.
template <class K>
struct RowSteps {
  const char* row[K::kRows];  // rows past M point at a real row (tile_rows never reads them)
  typename K::Step operator()(int64_t s, int r) const {
    typename K::Step v;
    std::memcpy(&v, row[r] + s * sizeof v, sizeof v);
    return v;
  }
};

// K::tile for the first `rows` rows of a tile (1 to K::kRows): a short last
// tile computes only its own rows. A row's chain is the same whichever tile
// size computes it (each lane is its own chain). A warm question's rows
// rarely fill the last tile: computing it whole was a tenth of every GEMM.
template <class K, int R = K::kRows, class A>
inline void tile_rows(int64_t rows, int64_t steps, const A& a, const typename K::Weight* b, const float* init, int64_t ld_init, float* c,
                      int64_t ldc, const char* prefetch) {
  if constexpr (R > 1)
    if (rows < R) return tile_rows<K, R - 1>(rows, steps, a, b, init, ld_init, c, ldc, prefetch);
  K::template tile<R>(steps, a, b, init, ld_init, c, ldc, prefetch);
}

// One tile of rows [row0, row0 + rows) and columns [col0, col0 + cols) over a
// block's `steps`, started from `init` (fresh: the bias row or null) or from
// the output (a later k block, or accumulate). A panel's last, narrower tiles
// and bf16 outputs go through a full-width fp32 copy on the stack.
template <class K, class A>
inline void run_tile(const GemmOperands& job, const A& a, int64_t steps, const typename K::Weight* b, const float* bias, bool fresh, int64_t row0,
                     int64_t rows, int64_t col0, int64_t cols, const char* prefetch) {
  constexpr int64_t rows_per_tile = K::kRows, width = K::kWidth;
  alignas(64) float edge[rows_per_tile][width];
  if (job.out_bf16) {  // fresh: one k block (run_panels)
    tile_rows<K>(rows, steps, a, b, bias, 0, &edge[0][0], width, prefetch);
    auto* out = static_cast<uint16_t*>(job.out) + row0 * job.ldc + col0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        uint32_t bits;
        std::memcpy(&bits, &edge[r][j], sizeof bits);
        out[r * job.ldc + j] = bf16_bits(bits);
      }
    return;
  }
  float* c = static_cast<float*>(job.out) + row0 * job.ldc + col0;
  if (cols == width) return tile_rows<K>(rows, steps, a, b, fresh ? bias : c, fresh ? 0 : job.ldc, c, job.ldc, prefetch);
  if (!fresh) {
    std::memset(edge, 0, sizeof edge);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(edge[r], c + r * job.ldc, cols * sizeof(float));
  }
  tile_rows<K>(rows, steps, a, b, fresh ? bias : &edge[0][0], fresh ? 0 : width, &edge[0][0], width, prefetch);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * job.ldc, edge[r], cols * sizeof(float));
}

// The loops every family shares: blocks of rows, then of k; within them, the
// thread's panels, then tiles of K::kRows rows. A remainder of under half a
// block joins the last block: each block streams all the thread's weights
// again, and a warm question's 49 rows in blocks of 48 and 1 streamed them
// twice for one more row. Where steps cannot be read in place (RowSteps), a
// block's activations are packed per thread, interleaved so that a tile reads
// its step's values together. A bf16 output takes K in one block, so that an
// output is complete when its tile is. A micro-kernel K provides:
//   In, Step, Weight: activation, packed activation (one row, one step) and
//     packed weight element types; kInPlace (a Step is kDepth Ins as stored,
//     read where they lie); kRows, kWidth, kDepth, kBlockRows, kBlockK
//     (a multiple of kDepth, so that steps never straddle blocks), kStepWeights
//     (Weight elements of one step of one panel);
//   Step step(const In* x, int64_t n): a row's next kDepth values, the last
//     past n zero;
//   tile<R>(steps, a, b, init, ld_init, c, ldc): c = init (ld_init 0: one row
//     for all; null: 0) + the chains of the tile's first R rows over `steps`
//     steps, step s of row r being a(s, r).
template <class K>
inline void run_panels(const GemmOperands& job, int64_t p_begin, int64_t p_end) {
  using Step = typename K::Step;
  constexpr int64_t rows_per_tile = K::kRows, width = K::kWidth, depth = K::kDepth;
  const auto* x = static_cast<const typename K::In*>(job.x);
  const auto* panels = static_cast<const typename K::Weight*>(job.panels);
  const int64_t steps_in_k = (job.k + depth - 1) / depth;
  const int64_t block_k = job.out_bf16 ? std::max(K::kBlockK, steps_in_k * depth) : K::kBlockK;
  const bool in_place = K::kInPlace && job.k % depth == 0;
  constexpr int64_t max_block_rows = K::kBlockRows + K::kBlockRows / 2;
  thread_local std::vector<Step> packed;  // [tiles][steps][kRows], this thread's copy
  if (!in_place) packed.resize(static_cast<size_t>((max_block_rows + rows_per_tile) * block_k / depth));
  for (int64_t m0 = 0, mc; m0 < job.m; m0 += mc) {
    mc = job.m - m0 < max_block_rows ? job.m - m0 : K::kBlockRows;
    const int64_t tiles = (mc + rows_per_tile - 1) / rows_per_tile;
    for (int64_t k0 = 0; k0 < job.k; k0 += block_k) {
      const int64_t kc = std::min(block_k, job.k - k0), steps = (kc + depth - 1) / depth;
      if (!in_place)
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
        // While tiles 1.. read this panel's block from L2 (tile 0 brought it),
        // each step of theirs asks for one line of the next panel's block, so
        // that the next tile 0 finds it in L2 rather than in memory (a third
        // faster in both families: bench/README.md, "Measurements behind the CPU kernels").
        const char* next = p + 1 < p_end ? reinterpret_cast<const char*>(b + steps_in_k * K::kStepWeights) : nullptr;
        const int64_t block_bytes = steps * K::kStepWeights * static_cast<int64_t>(sizeof(typename K::Weight));
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t row0 = m0 + t * rows_per_tile, rows = std::min(rows_per_tile, job.m - row0);
          const int64_t ahead = (t - 1) * steps * kPrefetchLine;
          const char* prefetch = next && t > 0 && ahead < block_bytes ? next + ahead : nullptr;
          if (in_place) {
            RowSteps<K> a;
            for (int64_t r = 0; r < rows_per_tile; ++r)
              a.row[r] = reinterpret_cast<const char*>(x + std::min(row0 + r, job.m - 1) * job.lda + k0);
            run_tile<K>(job, a, steps, b, bias, fresh, row0, rows, col0, cols, prefetch);
          } else {
            run_tile<K>(job, PackedSteps<K>{packed.data() + t * steps * rows_per_tile}, steps, b, bias, fresh, row0, rows, col0, cols, prefetch);
          }
        }
      }
    }
  }
}

}  // namespace tq::gemm
