// The int8 GEMM on AMX tiles (int8_gemm.h has the math), written against the
// tile operations of amx_tiles.h: the hardware's where the CPU has AMX-INT8,
// the model's in the tests. A block of 32 rows against 32 columns of a panel
// is four C tiles (16 x 16 int32 each), fed by two A tiles (16 rows x 16 steps
// of 4 activations each) and two B tiles (16 steps x 16 columns of 4
// weights), 16 steps at a time: each tile loaded feeds two dot products. The
// A tiles come from x in tile order (arrange_tiles: a tile's 1 KiB in a row);
// the panels are the VNNI kernel's, read in place: a B tile's rows are one
// step of a 16-column group, 256 bytes apart. Integer sums are exact, so the
// result is every other path's, bit for bit; the last fp32 step is theirs too
// (finish_tile, in AVX-512 vectors on the tiles).
#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/gemm/amx_tiles.h"
#include "kernels/cpu/gemm/int8_gemm.h"

namespace tq::int8_gemm {
namespace {

constexpr int64_t kRows = kBlockRows;
constexpr int64_t kStepBytes = kWidth * kDepth;  // one step of a panel: 64 columns x 4 weights

// The int32 sums of blocks `block` and `block + 1` of x_tiles (32 rows) against panel b, into sums: each half of
// the panel's columns in turn, C tiles 0-1 the first block's two 16-column groups, 2-3 the second's.
template <class Tiles>
void row_pair(const Int8GemmOperands& job, int64_t block, const int8_t* b, int32_t (*sums)[kWidth]) {
  const int64_t n_steps = steps(job.k), groups = tile_groups(job.k);
  const uint8_t* a0 = job.x_tiles + block * groups * kGroupBytes;
  const uint8_t* a1 = a0 + groups * kGroupBytes;
  constexpr int64_t ld = kWidth * 4;
  for (int64_t half = 0; half < 2; ++half) {
    const char* columns = reinterpret_cast<const char*>(b) + half * 2 * 64;
    Tiles::template zero<0>();
    Tiles::template zero<1>();
    Tiles::template zero<2>();
    Tiles::template zero<3>();
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t s0 = g * kGroupSteps, rows = std::min(kGroupSteps, n_steps - s0);
      Tiles::template load<4>(a0 + g * kGroupBytes, kGroupSteps * kDepth);
      amx::load_padded<Tiles, 5>(columns + s0 * kStepBytes, kStepBytes, rows, 64);
      Tiles::template dpbusd<0, 4, 5>();
      amx::load_padded<Tiles, 7>(columns + s0 * kStepBytes + 64, kStepBytes, rows, 64);
      Tiles::template dpbusd<1, 4, 7>();
      Tiles::template load<6>(a1 + g * kGroupBytes, kGroupSteps * kDepth);
      Tiles::template dpbusd<2, 6, 5>();
      Tiles::template dpbusd<3, 6, 7>();
    }
    char* at = reinterpret_cast<char*>(sums) + half * 2 * 64;
    Tiles::template store<0>(at, ld);
    Tiles::template store<1>(at + 64, ld);
    Tiles::template store<2>(at + kRows * ld, ld);
    Tiles::template store<3>(at + kRows * ld + 64, ld);
  }
}

// A thread's rows of x_tiles are read again for each of its panels: a chunk of them at a time, ChunkBytes, about half
// of an AMX Xeon's L2 (2 MiB a core from Sapphire Rapids on), so that a wide K (the MLP's down: 76 KiB a block)
// reads them from there, not from L3 once a panel; a panel (the weights: 304 KiB at that K) is read once a chunk.
// The model runs the same loops with chunks of one row pair, so that the checks' small cases cross chunks' bounds.
constexpr int64_t kChunkBytes = 1 << 20, kModelChunkBytes = 1;

// Finish: the last fp32 step (finish_tile, or its AVX-512 form on the tiles' CPUs: the same bits).
template <class Tiles, void (*Finish)(const Int8GemmOperands&, const int32_t (*)[kWidth], int64_t, int64_t, int64_t), int64_t ChunkBytes>
void panels_amx(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) {
  const int64_t panel_bytes = steps(job.k) * kStepBytes;
  const int64_t chunk_rows = 2 * kRows * std::max<int64_t>(1, ChunkBytes / (2 * tile_groups(job.k) * kGroupBytes));
  Tiles::configure();  // per call: the thread may be one of the pool's, each with its own configuration
  for (int64_t chunk = 0; chunk < job.m; chunk += chunk_rows)
    for (int64_t p = p_begin; p < p_end; ++p)
      for (int64_t row0 = chunk; row0 < std::min(job.m, chunk + chunk_rows); row0 += 2 * kRows) {
        alignas(64) int32_t sums[2 * kRows][kWidth];
        row_pair<Tiles>(job, row0 / kRows, job.panels + p * panel_bytes, sums);
        Finish(job, sums, row0, std::min(kRows, job.m - row0), p * kWidth);
        if (row0 + kRows < job.m) Finish(job, sums + kRows, row0 + kRows, std::min(kRows, job.m - row0 - kRows), p * kWidth);
      }
  Tiles::release();
}

#if defined(__x86_64__)
TQ_AMX __attribute__((flatten)) void panels_hardware(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) { panels_amx<amx::HardwareTiles, finish_tile_avx512, kChunkBytes>(job, p_begin, p_end); }
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
  return {panels_hardware, vnni_kernel().quantize, "amx-int8", /*tiled_x=*/true};
#else
  throw std::logic_error("the int8 AMX GEMM needs x86-64 with AMX-INT8");
#endif
}

Kernel amx_model_kernel() { return {panels_amx<amx::ModelTiles, finish_tile, kModelChunkBytes>, generic_kernel().quantize, "amx-model", /*tiled_x=*/true}; }

}  // namespace tq::int8_gemm
