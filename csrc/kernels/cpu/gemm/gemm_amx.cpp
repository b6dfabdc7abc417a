// The int8 GEMM on AMX tiles (int8_gemm.h has the math), written against the
// tile operations of amx_tiles.h: the hardware's where the CPU has AMX-INT8,
// the model's in the tests. A block of 16 rows against a panel of 64 columns
// is four C tiles (16 x 16 int32 each), fed by one A tile (16 rows x 16 steps
// of 4 activations) and one B tile per C tile (16 steps x 16 columns of 4
// weights), 16 steps at a time. The panels are the VNNI kernel's, read in
// place: a B tile's rows are one step of a 16-column group, 256 bytes apart.
// Integer sums are exact, so the result is every other path's, bit for bit;
// the last fp32 step is theirs too (finish_tile, in AVX-512 vectors on the tiles).
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/cpu/gemm/amx_tiles.h"
#include "kernels/cpu/gemm/int8_gemm.h"

namespace tq::int8_gemm {
namespace {

constexpr int64_t kRows = amx::kTileRows, kSteps = amx::kTileRows, kGroups = kWidth / 16;
constexpr int64_t kStepBytes = kWidth * kDepth;  // one step of a panel: 64 columns x 4 weights

// The int32 sums of rows [row0, row0 + rows) against panel b, into sums (a zero activation byte of the A tile's
// padding adds nothing: the weights' offsets count only the real ones, int8_gemm.h).
template <class Tiles>
void block(const Int8GemmOperands& job, int64_t row0, int64_t rows, const int8_t* b, int32_t (*sums)[kWidth]) {
  const int64_t n_steps = steps(job.k);
  std::memset(sums, 0, sizeof(int32_t) * kRows * kWidth);
  amx::panel_block<Tiles, amx::Dot::Int8>(sums, reinterpret_cast<const char*>(b), n_steps, kStepBytes, [&](int64_t s0) {
    amx::load_padded<Tiles, 4>(job.x + row0 * job.ldx + s0 * kDepth, job.ldx, rows, std::min(kSteps, n_steps - s0) * kDepth);
  });
}

// Finish: the last fp32 step (finish_tile, or its AVX-512 form on the tiles' CPUs: the same bits).
template <class Tiles, void (*Finish)(const Int8GemmOperands&, const int32_t (*)[kWidth], int64_t, int64_t, int64_t)>
void panels_amx(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) {
  static_assert(kGroups == 4, "a panel is four C tiles wide");
  const int64_t panel_bytes = steps(job.k) * kStepBytes;
  Tiles::configure();  // per call: the thread may be one of the pool's, each with its own configuration
  for (int64_t p = p_begin; p < p_end; ++p)
    for (int64_t row0 = 0; row0 < job.m; row0 += kRows) {
      const int64_t rows = std::min(kRows, job.m - row0);
      alignas(64) int32_t sums[kRows][kWidth];
      block<Tiles>(job, row0, rows, job.panels + p * panel_bytes, sums);
      Finish(job, sums, row0, rows, p * kWidth);
    }
  Tiles::release();
}

#if defined(__x86_64__)
TQ_AMX __attribute__((flatten)) void panels_hardware(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) { panels_amx<amx::HardwareTiles, finish_tile_avx512>(job, p_begin, p_end); }
#endif

}  // namespace

bool cpu_has_amx_int8() {
#if defined(__x86_64__)
  return cpu_has_vnni() && amx::cpu_has(amx::kInt8Bit);  // VNNI: its quantizer
#else
  return false;
#endif
}

Kernel amx_kernel() {
#if defined(__x86_64__)
  return {panels_hardware, vnni_kernel().quantize, "amx-int8"};
#else
  throw std::logic_error("the int8 AMX GEMM needs x86-64 with AMX-INT8");
#endif
}

Kernel amx_model_kernel() { return {panels_amx<amx::ModelTiles, finish_tile>, generic_kernel().quantize, "amx-model"}; }

}  // namespace tq::int8_gemm
