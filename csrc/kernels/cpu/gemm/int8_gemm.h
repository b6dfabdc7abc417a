// The int8 GEMM behind --quantization int8 (int8_linear.h): weights quantized
// once per output channel, activations per row at each call, products summed
// in int32, one fp32 step at the end.
//
//   weights, row j:    s_w[j] = max_k |W[j,k]| / 127,  q_w[j,k] = round(W[j,k] * 127 / max_k |W[j,k]|)
//   activations, row i: s_x[i] = max_k |x[i,k]| / 127,  q_x[i,k] likewise, stored as u8 = q_x + 128
//   acc[i,j] = sum_k u8[i,k] q_w[j,k] - 128 sum_k q_w[j,k]  (= sum_k q_x q_w, exactly)
//   y[i,j]   = fma(float(acc[i,j]), s_x[i] * s_w[j], init[i,j])   (init: bias, residual or 0)
//
// (round: to nearest even; q in [-127, 127]; a row of zeros has scale 0.) The
// u8 offset is what vpdpbusd wants (unsigned times signed bytes); the second
// sum is the "zero-point correction", kept per column at packing.
//
// Why a row's result depends on that row alone, on every path: q_x and s_x
// come from the row; integer sums are exact, so their order, the K blocking,
// the tile and the thread split cannot change them; the last step is one fp32
// expression per output. The VNNI and AVX2 micro-kernels and the generic loop
// therefore give the same bits, which the tests check. |acc| <= 255 * 127 * K, so K is
// at most kMaxK for int32.
#pragma once
#include <cmath>
#include <cstdint>

namespace tq::int8_gemm {

constexpr int64_t kWidth = 64;     // columns per panel: four 16-lane vectors
constexpr int64_t kDepth = 4;      // k per step: one vpdpbusd lane's four bytes
constexpr int64_t kMaxK = 65536;   // 255 * 127 * 65536 < 2^31
constexpr uint8_t kZeroPoint = 128;

inline int64_t steps(int64_t k) { return (k + kDepth - 1) / kDepth; }
inline int64_t panels(int64_t n) { return (n + kWidth - 1) / kWidth; }

// One call's operands. Every per-column array is padded to panels(n) * kWidth.
struct Int8GemmOperands {
  const uint8_t* x;        // [m, steps(k) * 4] activations as u8 (q + 128), rows ldx apart
  int64_t ldx;
  const float* x_scale;    // [m]
  const int8_t* panels;    // [panels][steps][kWidth][4]: bytes (p, s, c, t) = q_w[p * kWidth + c][4 s + t], zero past n and k
  const int32_t* offset;   // 128 * sum_k q_w[j, k]
  const float* w_scale;    // s_w
  const float* bias;       // or null
  void* out;               // [m, n], rows ldc apart: fp32, or bf16 where out_bf16
  int64_t ldc, m, k, n;
  bool accumulate;         // onto out (fp32 only)
  bool out_bf16;           // rounded to nearest even, as at::BFloat16
  const uint8_t* x_tiles = nullptr;  // x in tile order (arrange_tiles), for a kernel that reads it (Kernel::tiled_x)
};

// x in tile order, what the AMX kernel reads: 16-row blocks, each its groups of 16 steps in turn, a group 16 rows of
// 64 bytes in a row (one tile load of 1 KiB: from rows ldx apart the loads waited on 16 cache lines each), rows past m
// and bytes past a row's steps(k) * 4 zero, the blocks an even number (the kernel takes two at a time).
constexpr int64_t kBlockRows = 16, kGroupSteps = 16, kGroupBytes = kBlockRows * kGroupSteps * kDepth;
inline int64_t tile_groups(int64_t k) { return (steps(k) + kGroupSteps - 1) / kGroupSteps; }
inline int64_t tile_blocks(int64_t m) { return (m + 2 * kBlockRows - 1) / (2 * kBlockRows) * 2; }
inline int64_t tiled_bytes(int64_t m, int64_t k) { return tile_blocks(m) * tile_groups(k) * kGroupBytes; }
// Blocks [b_begin, b_end) of job.x's rows into `to`, the whole tile order's first byte.
void arrange_tiles(const Int8GemmOperands& job, int64_t b_begin, int64_t b_end, uint8_t* to);

// The last step, as every path computes it.
inline float finish(int32_t acc, int32_t offset, float x_scale, float w_scale, float init) {
  return std::fma(static_cast<float>(acc - offset), x_scale * w_scale, init);
}

// Writes a tile's outputs from its int32 sums acc[r][c] (rows row0.., columns
// col0.. of the job; only the first min(kWidth, n - col0) columns are kept).
void finish_tile(const Int8GemmOperands& job, const int32_t (*acc)[kWidth], int64_t row0, int64_t rows, int64_t col0);
// The same in AVX-512 vectors where the tile is whole (gemm_vnni.cpp; the VNNI and AMX kernels'): the same bits.
void finish_tile_avx512(const Int8GemmOperands& job, const int32_t (*acc)[kWidth], int64_t row0, int64_t rows, int64_t col0);

// One path: its loops over a job's panels [p_begin, p_end) on the calling
// thread, and its row quantizer (m rows of x, fp32 or bf16 values, rows ldx
// apart, into u8 rows of steps(k) * 4 bytes, zero points past k).
struct Kernel {
  void (*panels)(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end);
  void (*quantize)(const void* x, bool bf16, int64_t m, int64_t k, int64_t ldx, uint8_t* out, float* scale);
  const char* name;
  bool tiled_x = false;  // its panels read job.x_tiles, which the caller arranges once a call
};
Kernel generic_kernel();
Kernel vnni_kernel();  // gemm_vnni.cpp; needs AVX-512 VNNI (cpu_has_vnni)
bool cpu_has_vnni();
Kernel avx2_kernel();  // gemm_maddubs.cpp; needs AVX2 and FMA (cpu_has_avx2)
bool cpu_has_avx2();
// gemm_amx.cpp: AMX tiles (TDPBUSD), where the CPU has AMX-INT8 and the process was granted tile state
// (cpu_has_amx_int8 asks Linux for it); and the same kernel on a model of the tiles, for the tests, on any CPU.
Kernel amx_kernel();
Kernel amx_model_kernel();
bool cpu_has_amx_int8();

// Quantizes rows [j_begin, j_end) of w [n, k] (fp32, row j at w + j * k) into
// the panel layout and the per-column arrays, which the caller has zeroed
// (each padded as above). Rows are independent: threads may pack their own.
void pack(const float* w, int64_t k, int64_t j_begin, int64_t j_end, int8_t* panels, int32_t* offset, float* w_scale);

}  // namespace tq::int8_gemm
