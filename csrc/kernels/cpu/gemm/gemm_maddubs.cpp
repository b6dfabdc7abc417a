// The int8 GEMM on AVX2 (int8_gemm.h has the math), for CPUs without AVX-512
// VNNI. vpmaddubsw multiplies unsigned bytes by signed ones and adds each
// pair into a saturating int16, so the u8 activations (q + 128, up to 255)
// cannot go in as they are: 255 * 127 * 2 overflows int16. As llama.cpp's
// AVX2 dot products do, each activation byte goes back to q (in [-127, 127]),
// its magnitude goes in as the unsigned operand and its sign onto the weight
// (vpsignb): |q| * sign(q) w = q w, and a pair sums to at most 2 * 127 * 127 =
// 32,258, inside int16. vpmaddwd by ones then adds the pairs into int32 lanes,
// four products a column per step. The sums are sum_k q_x q_w exactly (no
// zero-point correction to take off), the same integers the other paths
// reach, and the last step is the same fp32 expression, so the outputs are
// the generic loop's bits.
//
// A tile is 2 rows x 32 columns (8 accumulators and 4 weight vectors of the
// 16 registers, the rest for a row's bytes, their magnitudes, a product and
// the constants); the 2 tiles of a 64-column panel run one after the other
// over the same rows: faster than 4 rows x 16 columns, and than taking the
// zero point off in a scalar register before the broadcast (bench/README.md,
// "Measurements behind the CPU kernels"). Each 32 products take four
// instructions (sign, maddubs, madd, add), two of them on the multiply pipes,
// where an FMA does 8 products in one: AVX2 needs vpmaddwd to widen the sums,
// which VNNI does in the same instruction, so int8 gains less over bf16 here.

#include "kernels/cpu/gemm/int8_gemm.h"

#if defined(__x86_64__)
#include "common/x86_intrinsics.h"

#include <algorithm>
#include <cstring>

namespace tq::int8_gemm {
namespace {

#define TQ_AVX2 __attribute__((target("avx2,fma")))

constexpr int kRows = 2;
constexpr int kVectors = 4;
constexpr int kTileColumns = 8 * kVectors;
constexpr int64_t kStepBytes = kWidth * kDepth;
constexpr int64_t kBlockRows = 48;  // rows per pass over the thread's panels, as the VNNI path

// Sums sum_k q_x q_w of the first R rows over all steps, for tile t of the panel (its columns from kTileColumns t).
template <int R>
TQ_AVX2 void tile(const Int8GemmOperands& job, int64_t row0, const int8_t* panel, int t, int32_t (*sums)[kWidth]) {
  const int64_t n_steps = steps(job.k);
  const __m256i ones = _mm256_set1_epi16(1), zero_points = _mm256_set1_epi8(static_cast<char>(kZeroPoint));
  __m256i acc[R][kVectors];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm256_setzero_si256();
  const uint8_t* x = job.x + row0 * job.ldx;
  const int8_t* b = panel + t * kTileColumns * kDepth;
  for (int64_t s = 0; s < n_steps; ++s) {
    __m256i w[kVectors];
    for (int v = 0; v < kVectors; ++v) w[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + s * kStepBytes + 32 * v));
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, x + r * job.ldx + s * kDepth, sizeof four);
      const __m256i q = _mm256_xor_si256(_mm256_set1_epi32(four), zero_points);  // u8 - 128, as s8
      const __m256i magnitude = _mm256_abs_epi8(q);
      for (int v = 0; v < kVectors; ++v)
        acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w[v], q)), ones));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVectors; ++v) _mm256_store_si256(reinterpret_cast<__m256i*>(sums[r] + t * kTileColumns + 8 * v), acc[r][v]);
}

template <int R = kRows>
TQ_AVX2 void tile_rows(int64_t rows, const Int8GemmOperands& job, int64_t row0, const int8_t* panel, int t, int32_t (*sums)[kWidth]) {
  if constexpr (R > 1)
    if (rows < R) return tile_rows<R - 1>(rows, job, row0, panel, t, sums);
  tile<R>(job, row0, panel, t, sums);
}

// bf16_bits (bf16.h) on 8 lanes, in the low 16 bits of each.
TQ_AVX2 __m256i bf16_lanes(__m256 y) {
  const __m256i bits = _mm256_castps_si256(y);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
}

// The last step, fma(float(sum), s_x s_w, init), 16 columns at a time where the tile is whole; else
// finish_tile's loop, which takes the zero-point correction off sums that carry it (so it is put on).
TQ_AVX2 void finish_vectors(const Int8GemmOperands& job, int32_t (*sums)[kWidth], int64_t row0, int64_t rows, int64_t col0) {
  if (col0 + kWidth > job.n) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < kWidth; ++c) sums[r][c] += job.offset[col0 + c];
    return finish_tile(job, sums, row0, rows, col0);
  }
  for (int64_t c = 0; c < kWidth; c += 16) {
    __m256 w_scale[2], bias[2];
    for (int h = 0; h < 2; ++h) {
      w_scale[h] = _mm256_loadu_ps(job.w_scale + col0 + c + 8 * h);
      bias[h] = job.bias ? _mm256_loadu_ps(job.bias + col0 + c + 8 * h) : _mm256_setzero_ps();
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = (row0 + r) * job.ldc + col0 + c;
      const __m256 x_scale = _mm256_set1_ps(job.x_scale[row0 + r]);
      __m256 y[2];
      for (int h = 0; h < 2; ++h) {
        const __m256 init = job.accumulate ? _mm256_loadu_ps(static_cast<float*>(job.out) + at + 8 * h) : bias[h];
        const __m256 sum = _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums[r] + c + 8 * h)));
        y[h] = _mm256_fmadd_ps(sum, _mm256_mul_ps(x_scale, w_scale[h]), init);
      }
      if (job.out_bf16) {
        // packus works within 128-bit halves: (a0-3, b0-3, a4-7, b4-7), put back in order.
        const __m256i packed = _mm256_packus_epi32(bf16_lanes(y[0]), bf16_lanes(y[1]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(job.out) + at), _mm256_permute4x64_epi64(packed, 0xd8));
      } else {
        for (int h = 0; h < 2; ++h) _mm256_storeu_ps(static_cast<float*>(job.out) + at + 8 * h, y[h]);
      }
    }
  }
}

TQ_AVX2 void panels_avx2(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) {
  const int64_t panel_bytes = steps(job.k) * kStepBytes;
  constexpr int64_t max_block_rows = kBlockRows + kBlockRows / 2;
  for (int64_t m0 = 0, mc; m0 < job.m; m0 += mc) {
    mc = job.m - m0 < max_block_rows ? job.m - m0 : kBlockRows;
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int8_t* panel = job.panels + p * panel_bytes;
      for (int64_t row0 = m0; row0 < m0 + mc; row0 += kRows) {
        const int64_t rows = std::min<int64_t>(kRows, m0 + mc - row0);
        alignas(32) int32_t sums[kRows][kWidth];
        for (int t = 0; t < kWidth / kTileColumns; ++t) tile_rows(rows, job, row0, panel, t, sums);
        finish_vectors(job, sums, row0, rows, p * kWidth);
      }
    }
  }
}

// 32 values of a row as fp32 (bf16 widened by its bits), into v; past `count`, zeros.
TQ_AVX2 void load32(const void* x, bool bf16, int64_t at, int64_t count, __m256 v[4]) {
  alignas(32) float tail[32];
  const float* from;
  if (count >= 32 && !bf16) {
    from = static_cast<const float*>(x) + at;
  } else if (count >= 32) {
    for (int h = 0; h < 4; ++h) {
      const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(x) + at + 8 * h));
      v[h] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
    }
    return;
  } else {
    for (int64_t j = 0; j < 32; ++j) {
      uint32_t bits = 0;
      if (j < count && bf16) bits = static_cast<uint32_t>(static_cast<const uint16_t*>(x)[at + j]) << 16;
      if (j < count && !bf16) std::memcpy(&bits, static_cast<const float*>(x) + at + j, sizeof bits);
      std::memcpy(tail + j, &bits, sizeof bits);
    }
    from = tail;
  }
  for (int h = 0; h < 4; ++h) v[h] = _mm256_loadu_ps(from + 8 * h);
}

// The generic quantizer's rule (int8_gemm.cpp) on 8 lanes: the same max, the same product, rounding to
// nearest even and the same clamp; 32 values at a time.
TQ_AVX2 void quantize_avx2(const void* x, bool bf16, int64_t m, int64_t k, int64_t ldx, uint8_t* out, float* scale) {
  const int64_t width = steps(k) * kDepth;
  const __m256 sign = _mm256_set1_ps(-0.0f), limit = _mm256_set1_ps(127.0f), low = _mm256_set1_ps(-127.0f);
  const __m256i zero_point = _mm256_set1_epi32(kZeroPoint), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < m; ++i) {
    __m256 amax = _mm256_setzero_ps();
    __m256 v[4];
    for (int64_t kk = 0; kk < k; kk += 32) {
      load32(x, bf16, i * ldx + kk, k - kk, v);
      for (int h = 0; h < 4; ++h) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[h]));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, amax);
    const float max = *std::max_element(lanes, lanes + 8);
    scale[i] = max / 127.0f;
    const __m256 inverse = _mm256_set1_ps(max > 0 ? 127.0f / max : 0.0f);
    uint8_t* row = out + i * width;
    for (int64_t kk = 0; kk < k; kk += 32) {
      load32(x, bf16, i * ldx + kk, k - kk, v);
      __m256i u[4];
      for (int h = 0; h < 4; ++h) {
        const __m256 q = _mm256_round_ps(_mm256_mul_ps(v[h], inverse), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        u[h] = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(q, low), limit)), zero_point);
      }
      // 1..255 each: packs to int16 and packus to u8 keep them. Both work within 128-bit halves, which
      // leaves the groups of four bytes as u[0] low, u[1] low, u[2] low, u[3] low, then the high halves.
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(_mm256_packs_epi32(u[0], u[1]), _mm256_packs_epi32(u[2], u[3])), order);
      alignas(32) uint8_t quantized[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(quantized), bytes);
      std::memcpy(row + kk, quantized, static_cast<size_t>(std::min<int64_t>(32, k - kk)));
    }
    std::fill(row + k, row + width, kZeroPoint);
  }
}

}  // namespace

bool cpu_has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

Kernel avx2_kernel() { return {panels_avx2, quantize_avx2, "avx2"}; }

}  // namespace tq::int8_gemm
#else
#include <stdexcept>
namespace tq::int8_gemm {
bool cpu_has_avx2() { return false; }
Kernel avx2_kernel() { throw std::logic_error("the int8 AVX2 GEMM needs x86-64 with AVX2"); }
}  // namespace tq::int8_gemm
#endif
