// The GEMM of our own on few rows (kernels/cuda/few_rows_mma.cuh): y = x w^T, bf16 in and out, its products summed by
// the tensor cores 16 of K at a time in K's order into one fp32 accumulator an element, whatever the rows and whatever
// the tiling (so a row's bits cannot depend on the other rows, nor on which tiling ran). Its arguments, tilings and
// launch geometry, for the kernel, its launch and the CPU check. An engine form where asked for (GemmForm's Own forms,
// the option ownGemm) until a GPU has run it: bench/gpu's window probes it first (tq_cli gemm-rows; docs/gpu.md, "The
// GEMM on few rows").
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/math/host_device_math.h"

namespace tq::few_rows_mma {

constexpr int kMaxRows = 256;  // the few-row forms' bound (few_rows_gemm.h's kFewRows): blocks of 16 or 32 rows over it
constexpr int kStageK = 64;    // of K, a pipeline stage: its rows of x and of w in shared memory
// A stage's row in shared memory, in bf16 elements: 16-byte aligned, and the 8 rows x 4 words a fragment's lanes read
// at once fall on 32 different banks (a row 36 words on).
constexpr int kRowStride = kStageK + 8;
constexpr size_t kDefaultSharedBytes = 48 * 1024;  // what a launch gets without opting in

// A block's work: row_tiles x col_tiles warps, each a 16 x 8 tile of y, and the stages of its pipeline. Which is fastest
// is the GPU's to say (the bytes a block reads against the blocks there are); the bits are the same for every tiling.
struct Tiling {
  int row_tiles, col_tiles, stages;
};
// 32 x 16 a block (the first built), 16 x 16, 16 x 8 (the most blocks), 32 x 8; stages to fill the default shared memory.
constexpr Tiling kTilings[] = {{2, 2, 6}, {1, 2, 10}, {1, 1, 12}, {2, 1, 8}};
constexpr int kTilingCount = static_cast<int>(sizeof(kTilings) / sizeof(kTilings[0]));

TQ_HOST_DEVICE constexpr int block_rows(Tiling t) { return 16 * t.row_tiles; }
TQ_HOST_DEVICE constexpr int block_cols(Tiling t) { return 8 * t.col_tiles; }
TQ_HOST_DEVICE constexpr int threads(Tiling t) { return 32 * t.row_tiles * t.col_tiles; }
TQ_HOST_DEVICE constexpr int stage_elements(Tiling t) { return (block_rows(t) + block_cols(t)) * kRowStride; }
TQ_HOST_DEVICE constexpr size_t shared_bytes(Tiling t) { return static_cast<size_t>(t.stages) * stage_elements(t) * sizeof(uint16_t); }
// A stage is copied in 16-byte pieces, as many by every thread.
constexpr bool pieces_even(Tiling t) { return (block_rows(t) + block_cols(t)) * (kStageK / 8) % threads(t) == 0; }
constexpr bool all_fit() {
  for (const Tiling t : kTilings)
    if (shared_bytes(t) > kDefaultSharedBytes || !pieces_even(t) || t.stages < 2) return false;
  return true;
}
static_assert(all_fit(), "every tiling within the default shared memory, its pieces even over its threads");

struct Args {
  const uint16_t* x;  // [rows, k] bf16, row-major
  const uint16_t* w;  // [n, k] bf16, row-major (a linear layer's weights)
  uint16_t* y;        // [rows, n] bf16
  int rows, k, n;
};

// What tiling `t` takes: 1 to kMaxRows rows, K in whole stages, the columns in whole blocks (and 16-byte aligned
// arrays, which the launch checks).
inline bool fits(const Args& a, Tiling t) {
  return a.rows >= 1 && a.rows <= kMaxRows && a.k > 0 && a.k % kStageK == 0 && a.n > 0 && a.n % block_cols(t) == 0;
}

}  // namespace tq::few_rows_mma
