// A bf16 GEMM on AMX tiles (TDPBF16PS), written against amx_tiles.h: the
// native bf16 arithmetic of AMX Xeons, which `--arithmetic native` chooses. Its bits are not the
// portable arithmetic's: the instruction rounds a chain of pairs in its own way
// (amx_tiles.h). It is batch-invariant all the same: an output's chain is its
// row and column's pairs, 16 at a time in k order, whatever the rows, the
// column split or the addresses, and the C tiles hold the whole K (no k
// blocks). The weights are the vdpbf16ps family's panels (gemm_dpbf16.cpp: one
// word per column and pair of k, 64 columns), read in place: a B tile's rows
// are one pair step of a 16-column group, 256 bytes apart.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/gemm/amx_tiles.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm/gemm_kernels.h"


namespace tq::gemm {
namespace {

constexpr int64_t kRows = amx::kTileRows, kPairs = amx::kTileRows, kWidth = 64, kStepBytes = kWidth * 4;

// Rows [row0, row0 + rows) against one panel: c starts as the outputs' initial values (fp32) and ends as the
// outputs; the A tile holds k [2 s0, 2 s0 + 32) of the rows.
template <class Tiles>
void block(const GemmOperands& job, int64_t row0, int64_t rows, const char* panel, float (*c)[kWidth]) {
  const auto* x = static_cast<const uint16_t*>(job.x) + row0 * job.lda;
  amx::panel_block<Tiles>(c, panel, (job.k + 1) / 2, kStepBytes, [&](int64_t s0) {
    amx::load_padded<Tiles, 4>(x + 2 * s0, job.lda * 2, rows, std::min<int64_t>(2 * kPairs, job.k - 2 * s0) * 2);
  });
}

template <class Tiles>
void panels_amx_bf16(const GemmOperands& job, int64_t p_begin, int64_t p_end) {
  const int64_t panel_bytes = (job.k + 1) / 2 * kStepBytes;
  Tiles::configure();
  for (int64_t p = p_begin; p < p_end; ++p)
    for (int64_t row0 = 0; row0 < job.m; row0 += kRows) {
      const int64_t rows = std::min(kRows, job.m - row0), col0 = p * kWidth, cols = std::min(kWidth, job.n - col0);
      alignas(64) float c[kRows][kWidth] = {};
      for (int64_t r = 0; r < rows; ++r)
        if (job.accumulate) std::memcpy(c[r], static_cast<const float*>(job.out) + (row0 + r) * job.ldc + col0, cols * 4);
        else if (job.bias) std::memcpy(c[r], job.bias + col0, kWidth * 4);
      block<Tiles>(job, row0, rows, static_cast<const char*>(job.panels) + p * panel_bytes, c);
      for (int64_t r = 0; r < rows; ++r) {
        if (!job.out_bf16) {
          std::memcpy(static_cast<float*>(job.out) + (row0 + r) * job.ldc + col0, c[r], cols * 4);
          continue;
        }
        auto* out = static_cast<uint16_t*>(job.out) + (row0 + r) * job.ldc + col0;
        for (int64_t j = 0; j < cols; ++j) {
          uint32_t bits;
          std::memcpy(&bits, &c[r][j], 4);
          out[j] = bf16_bits(bits);
        }
      }
    }
  Tiles::release();
}

#if defined(__x86_64__)
TQ_AMX __attribute__((flatten)) void panels_hardware(const GemmOperands& job, int64_t a, int64_t b) { panels_amx_bf16<amx::HardwareTiles>(job, a, b); }
#endif

// The vdpbf16ps family's panels and packing (no instruction of its runs here), these loops.
Kernel with_panels(PanelsFn run) {
  Kernel k = dpbf16_kernel();
  k.run = run;
  return k;
}

}  // namespace

bool cpu_has_amx_bf16() {
#if defined(__x86_64__)
  return amx::cpu_has(amx::kBf16Bit);
#else
  return false;
#endif
}

Kernel amx_bf16_kernel() {
#if defined(__x86_64__)
  return with_panels(panels_hardware);
#else
  throw std::logic_error("the bf16 AMX GEMM needs x86-64 with AMX-BF16");
#endif
}

Kernel amx_bf16_model_kernel() { return with_panels(panels_amx_bf16<amx::ModelTiles>); }

bool native_bf16_available() {
  const char* model = std::getenv("TQ_AMX_MODEL");
  return cpu_has_amx_bf16() || (model && std::string(model) == "1");
}

}  // namespace tq::gemm
