// The few-row GEMM's kernel body (few_rows_mma.cu launches it), apart from the launch so that a host compiler builds it
// too: the CPU check runs this body through host_emulation.h (test/native/cuda_bodies_check.cpp), its indexing and
// pipeline against a host reference of the emulation's arithmetic. One translation unit of a program includes this.
//
// A block computes a tile of y (16 or 32 rows by 8 or 16 columns: its Tiling), a warp one 16 x 8 tile of it with PTX's
// mma.m16n8k16 (bf16 in, fp32 accumulating), down K in order: so each product of 16 lands in one accumulator in K's
// order whatever the rows and tiling, as cuBLAS's kernels without split-K appear to sum (docs/gpu.md, "The GEMM on few
// rows").
// Few rows are little arithmetic and many bytes: the block's x rows (zeros past the last) and w rows go through shared
// memory in a pipeline of cp.async stages, kStages - 1 of them in flight while the warps compute on the one that
// landed, where fragments loaded from global memory as they are needed left a warp waiting out each round trip.
#pragma once
#include <cstdint>

#include "kernels/cuda/host_emulation.h"
#include "kernels/math/few_rows_mma_math.h"
#include "kernels/math/host_device_math.h"

namespace tq::cuda {
namespace {

using namespace few_rows_mma;

// 16 bytes from global memory into shared memory, not through registers; of them `bytes` read (0: all zeros).
__device__ inline void copy_16_async(void* shared_to, const void* from, int bytes) {
#if defined(__CUDA_ARCH__)
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared_to));
  // "memory": the copy writes shared memory the compiler does not see written; no load of it may move across.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(bytes) : "memory");
#elif !defined(__CUDACC__)
  emulation::copy_16_async(shared_to, from, bytes);
#endif
}

// The copies issued since the last commit become a group.
__device__ inline void commit_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::);
#elif !defined(__CUDACC__)
  emulation::commit_copies();
#endif
}

// Until at most kPending of this thread's groups are unfinished.
template <int kPending>
__device__ inline void wait_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#elif !defined(__CUDACC__)
  emulation::wait_copies(kPending);
#endif
}

// d = a b + d, a warp's fragments of a 16 x 16 bf16 a (row-major), a 16 x 8 bf16 b (column-major) and a 16 x 8 fp32 d.
__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__)
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif !defined(__CUDACC__)
  emulation::mma_16816(d, a, b);
#endif
}

// Stage `s`'s copies into its slot: the block's rows of x (zeros past the last row) and its columns' rows of w, kStageK
// elements each, in 16-byte pieces, as many a thread.
template <int kRowTiles, int kColTiles, int kStages>
__device__ inline void fetch_stage(const Args& a, uint16_t* stages, int s, int first_row, int first_col) {
  constexpr Tiling kTiling{kRowTiles, kColTiles, kStages};
  constexpr int kRows = block_rows(kTiling), kThreads = threads(kTiling), kPiecesPerRow = kStageK / 8;
  constexpr int kPieces = (kRows + block_cols(kTiling)) * kPiecesPerRow;
  uint16_t* xs = stages + (s % kStages) * stage_elements(kTiling);
  uint16_t* ws = xs + kRows * kRowStride;
#pragma unroll
  for (int i = 0; i < kPieces / kThreads; ++i) {
    const int piece = static_cast<int>(threadIdx.x) + i * kThreads, row = piece / kPiecesPerRow, at = piece % kPiecesPerRow * 8;
    const int64_t k = static_cast<int64_t>(s) * kStageK + at;
    if (row < kRows) {
      const bool real = first_row + row < a.rows;
      copy_16_async(xs + row * kRowStride + at, a.x + (real ? (first_row + row) * static_cast<int64_t>(a.k) + k : 0), real ? 16 : 0);
    } else {
      const int col = first_col + row - kRows;
      copy_16_async(ws + (row - kRows) * kRowStride + at, a.w + col * static_cast<int64_t>(a.k) + k, 16);
    }
  }
}

// A block: rows [blockIdx.y block_rows, +block_rows) by columns [blockIdx.x block_cols, +block_cols), warp w the tile
// (w / kColTiles, w % kColTiles).
template <int kRowTiles, int kColTiles, int kStages>
__global__ void few_rows_mma_kernel(Args a) {
  constexpr Tiling kTiling{kRowTiles, kColTiles, kStages};
  uint16_t* stages = dynamic_shared<uint16_t>();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int group = lane / 4, quad = lane % 4;  // PTX's groupID and threadID_in_group
  const int row_tile = warp / kColTiles, col_tile = warp % kColTiles;
  const int first_row = static_cast<int>(blockIdx.y) * block_rows(kTiling), first_col = static_cast<int>(blockIdx.x) * block_cols(kTiling);
  const int steps = a.k / kStageK;
  const bool rows_here = first_row + row_tile * 16 < a.rows;  // the warp's tile holds a row (alike across its lanes)
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) fetch_stage<kRowTiles, kColTiles, kStages>(a, stages, s, first_row, first_col);
    commit_copies();  // a group a stage, empty ones too: the wait below counts them
  }
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int s = 0; s < steps; ++s) {
    wait_copies<kStages - 2>();  // this thread's copies of stage s have landed
    __syncthreads();             // and every thread's; every warp is done with stage s - 1's slot, refilled next
    if (s + kStages - 1 < steps) fetch_stage<kRowTiles, kColTiles, kStages>(a, stages, s + kStages - 1, first_row, first_col);
    commit_copies();
    if (!rows_here) continue;
    const uint16_t* xs = stages + (s % kStages) * stage_elements(kTiling) + row_tile * 16 * kRowStride;
    const uint16_t* ws = stages + (s % kStages) * stage_elements(kTiling) + (block_rows(kTiling) + col_tile * 8) * kRowStride;
#pragma unroll
    for (int kk = 0; kk < kStageK; kk += 16) {
      // PTX's fragments: a's rows group and group + 8, b's column group; K's pairs 2 quad and 2 quad + 8 of the 16.
      const uint16_t* upper = xs + group * kRowStride + kk + 2 * quad;
      const uint16_t* lower = upper + 8 * kRowStride;
      const uint16_t* column = ws + group * kRowStride + kk + 2 * quad;
      const uint32_t af[4] = {exact::load_word(upper), exact::load_word(lower), exact::load_word(upper + 8), exact::load_word(lower + 8)};
      const uint32_t bf[2] = {exact::load_word(column), exact::load_word(column + 8)};
      mma_16816(acc, af, bf);
    }
  }
  if (!rows_here) return;
  // The accumulators' places: rows group and group + 8 of the tile, columns 2 quad and 2 quad + 1 of its 8.
  const int col = first_col + col_tile * 8 + 2 * quad;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = first_row + row_tile * 16 + group + 8 * half;
    if (row >= a.rows) continue;
    const uint32_t both = static_cast<uint32_t>(exact::narrow_bf16(acc[2 * half])) | static_cast<uint32_t>(exact::narrow_bf16(acc[2 * half + 1])) << 16;
    uint16_t* to = a.y + row * static_cast<int64_t>(a.n) + col;
    store_vector(to, both);
  }
}

// Calls run(kernel, grid, block, shared bytes) with tiling kTilings[index]'s kernel and geometry for `a`; false for no
// such index. The launch and the CPU check both go through it, so they launch alike.
template <typename Run>
bool with_tiling(int index, const Args& a, Run&& run) {
  const auto go = [&](auto kernel, Tiling t) {
    run(kernel, dim3(static_cast<unsigned>(a.n / block_cols(t)), static_cast<unsigned>((a.rows + block_rows(t) - 1) / block_rows(t))),
        dim3(static_cast<unsigned>(threads(t))), shared_bytes(t));
    return true;
  };
  switch (index) {
    case 0: return go(few_rows_mma_kernel<kTilings[0].row_tiles, kTilings[0].col_tiles, kTilings[0].stages>, kTilings[0]);
    case 1: return go(few_rows_mma_kernel<kTilings[1].row_tiles, kTilings[1].col_tiles, kTilings[1].stages>, kTilings[1]);
    case 2: return go(few_rows_mma_kernel<kTilings[2].row_tiles, kTilings[2].col_tiles, kTilings[2].stages>, kTilings[2]);
    case 3: return go(few_rows_mma_kernel<kTilings[3].row_tiles, kTilings[3].col_tiles, kTilings[3].stages>, kTilings[3]);
    default: return false;
  }
}
static_assert(kTilingCount == 4, "with_tiling has a case a tiling");

}  // namespace
}  // namespace tq::cuda
