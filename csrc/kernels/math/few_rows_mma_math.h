// The GEMM of our own on few rows (kernels/cuda/few_rows_mma.cuh): y = x w^T, bf16 in and out, its products summed by
// the tensor cores 16 of K at a time in K's order into one fp32 accumulator a element, whatever the rows (so a row's
// bits cannot depend on the others). Its arguments and launch geometry, for the kernel, its launch and the CPU check.
// An engine form where asked for (GemmForm::OwnMma, the option ownGemm) until a GPU has run it: bench/gpu's window probes
// it first (tq_cli gemm-rows; docs/gpu.md, "The GEMM on few rows").
#pragma once
#include <cstddef>
#include <cstdint>

namespace tq::few_rows_mma {

constexpr int kMaxRows = 32;    // two tiles of 16 rows
constexpr int kBlockCols = 16;  // a block's output columns: two tiles of 8
constexpr int kWarps = 4;       // a warp per (row tile, column tile)
constexpr int kStageK = 64;     // of K, a pipeline stage: its rows of x and of w in shared memory
constexpr int kStages = 6;      // stages in flight, or computed on
// A stage's row in shared memory, in bf16 elements: 16-byte aligned, and the 8 rows x 4 words a fragment's lanes read
// at once fall on 32 different banks (a row 36 words on).
constexpr int kRowStride = kStageK + 8;
constexpr int kStageElements = (kMaxRows + kBlockCols) * kRowStride;
constexpr size_t kSharedBytes = static_cast<size_t>(kStages) * kStageElements * sizeof(uint16_t);
static_assert(kSharedBytes <= 48 * 1024, "within the shared memory a launch gets without opting in");

struct Args {
  const uint16_t* x;  // [rows, k] bf16, row-major
  const uint16_t* w;  // [n, k] bf16, row-major (a linear layer's weights)
  uint16_t* y;        // [rows, n] bf16
  int rows, k, n;
};

// What the kernel takes: 1 to kMaxRows rows, K in whole stages, the columns in whole blocks (and 16-byte aligned
// arrays, which the launch checks).
inline bool fits(const Args& a) { return a.rows >= 1 && a.rows <= kMaxRows && a.k > 0 && a.k % kStageK == 0 && a.n > 0 && a.n % kBlockCols == 0; }

}  // namespace tq::few_rows_mma
