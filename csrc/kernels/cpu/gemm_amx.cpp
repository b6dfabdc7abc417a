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

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/int8_gemm.h"


namespace tq::int8_gemm {
namespace {

constexpr int64_t kRows = amx::kTileRows, kSteps = amx::kTileRows, kGroups = kWidth / 16;
constexpr int64_t kStepBytes = kWidth * kDepth;  // one step of a panel: 64 columns x 4 weights
enum Tile { kC0 = 0, kA = 4, kB = 5 };

// One C tile's 16 steps from `group`'s 16 columns (a B tile row is one step: 256 bytes apart in the panel).
template <class Tiles, int C>
inline void multiply_group(const int8_t* b, int64_t s0, int64_t n_steps, int64_t group) {
  amx::load_padded<Tiles, kB>(b + s0 * kStepBytes + group * 64, kStepBytes, std::min(kSteps, n_steps - s0), 64);
  Tiles::template dpbusd<C, kA, kB>();
}

// The A tile of rows [row0, row0 + rows) over steps [s0, s0 + 16) (a zero activation byte adds nothing: the
// weights' offsets count only the real ones, int8_gemm.h).
template <class Tiles>
inline void load_activations(const Job& job, int64_t row0, int64_t rows, int64_t s0, int64_t n_steps) {
  amx::load_padded<Tiles, kA>(job.x + row0 * job.ldx + s0 * kDepth, job.ldx, rows, std::min(kSteps, n_steps - s0) * kDepth);
}

// Rows [row0, row0 + rows) against panel b: the int32 sums of its 64 columns, into sums.
template <class Tiles>
void block(const Job& job, int64_t row0, int64_t rows, const int8_t* b, int32_t (*sums)[kWidth]) {
  const int64_t n_steps = steps(job.k);
  Tiles::template zero<kC0>();
  Tiles::template zero<kC0 + 1>();
  Tiles::template zero<kC0 + 2>();
  Tiles::template zero<kC0 + 3>();
  for (int64_t s0 = 0; s0 < n_steps; s0 += kSteps) {
    load_activations<Tiles>(job, row0, rows, s0, n_steps);
    multiply_group<Tiles, kC0>(b, s0, n_steps, 0);
    multiply_group<Tiles, kC0 + 1>(b, s0, n_steps, 1);
    multiply_group<Tiles, kC0 + 2>(b, s0, n_steps, 2);
    multiply_group<Tiles, kC0 + 3>(b, s0, n_steps, 3);
  }
  Tiles::template store<kC0>(&sums[0][0], kWidth * 4);
  Tiles::template store<kC0 + 1>(&sums[0][16], kWidth * 4);
  Tiles::template store<kC0 + 2>(&sums[0][32], kWidth * 4);
  Tiles::template store<kC0 + 3>(&sums[0][48], kWidth * 4);
}

// Finish: the last fp32 step (finish_tile, or its AVX-512 form on the tiles' CPUs: the same bits).
template <class Tiles, void (*Finish)(const Job&, const int32_t (*)[kWidth], int64_t, int64_t, int64_t)>
void panels_amx(const Job& job, int64_t p_begin, int64_t p_end) {
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
TQ_AMX __attribute__((flatten)) void panels_hardware(const Job& job, int64_t p_begin, int64_t p_end) { panels_amx<amx::HardwareTiles, finish_tile_avx512>(job, p_begin, p_end); }
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

Kernel amx_model_kernel() { return {panels_amx<amx::ModelTiles, finish_tile>, portable_kernel().quantize, "amx-model"}; }

}  // namespace tq::int8_gemm
