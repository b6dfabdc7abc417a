// The int8 GEMM on AVX-512 VNNI (int8_gemm.h has the math): vpdpbusd adds, in
// each of 16 int32 lanes, four products of an activation's u8 bytes with a
// column's s8 bytes. A tile is 6 rows x 64 columns (24 accumulators, 4 weight
// vectors and a broadcast, of 32 registers), as the vdpbf16ps family's, with
// twice the multiply-adds per instruction and half the weight bytes. Integer
// sums are exact, so the whole K is one chain in registers (no k blocks) and
// the result is the generic loop's, bit for bit.
#include "kernels/cpu/gemm/int8_gemm.h"

#if defined(__x86_64__)
#include "common/x86_intrinsics.h"

#include <algorithm>

namespace tq::int8_gemm {
namespace {

#define TQ_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int kRows = 6, kVectors = kWidth / 16;
// Rows per block: each block streams the thread's panels once, from L2 while
// tiles 1.. of the block read what tile 0 brought (as gemm_kernels.h says).
constexpr int64_t kBlockRows = 48;
constexpr int64_t kPrefetchLine = 64;

// The sums of the first R rows of a tile over all steps (rows ldx apart, panel
// b), stored to sums. (Written to memory once per tile: with the last step
// inside this function GCC 12 kept the 24 accumulators on the stack, storing
// each at every step; bench/README.md, "Measurements behind the CPU kernels".)
template <int R>
TQ_VNNI void tile(const Int8GemmOperands& job, int64_t row0, const int8_t* b, const char* prefetch, int32_t (*sums)[kWidth]) {
  const int64_t n_steps = steps(job.k);
  __m512i acc[R][kVectors];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_si512();
  const uint8_t* x = job.x + row0 * job.ldx;
  for (int64_t s = 0; s < n_steps; ++s) {
    if (prefetch) _mm_prefetch(prefetch + s * kPrefetchLine, _MM_HINT_T1);
    __m512i w[kVectors];
    for (int v = 0; v < kVectors; ++v) w[v] = _mm512_loadu_si512(b + (s * kVectors + v) * 64);
    for (int r = 0; r < R; ++r) {
      int32_t four;
      __builtin_memcpy(&four, x + r * job.ldx + s * kDepth, sizeof four);
      const __m512i a = _mm512_set1_epi32(four);
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], a, w[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVectors; ++v) _mm512_store_si512(sums[r] + v * 16, acc[r][v]);
}

// bf16_bits (bf16.h) on 16 lanes: the same integer rounding to nearest even.
TQ_VNNI __m256i to_bf16(__m512 y) {
  const __m512i bits = _mm512_castps_si512(y);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd), 16));
}

template <int R = kRows>
TQ_VNNI void tile_rows(int64_t rows, const Int8GemmOperands& job, int64_t row0, const int8_t* b, const char* prefetch, int32_t (*sums)[kWidth]) {
  if constexpr (R > 1)
    if (rows < R) return tile_rows<R - 1>(rows, job, row0, b, prefetch, sums);
  tile<R>(job, row0, b, prefetch, sums);
}

TQ_VNNI void panels_vnni(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) {
  const int64_t panel_bytes = steps(job.k) * kWidth * kDepth;
  constexpr int64_t max_block_rows = kBlockRows + kBlockRows / 2;
  for (int64_t m0 = 0, mc; m0 < job.m; m0 += mc) {
    mc = job.m - m0 < max_block_rows ? job.m - m0 : kBlockRows;
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int8_t* b = job.panels + p * panel_bytes;
      const char* next = p + 1 < p_end ? reinterpret_cast<const char*>(b + panel_bytes) : nullptr;
      for (int64_t row0 = m0, t = 0; row0 < m0 + mc; row0 += kRows, ++t) {
        const int64_t ahead = (t - 1) * steps(job.k) * kPrefetchLine;
        const char* prefetch = next && t > 0 && ahead < panel_bytes ? next + ahead : nullptr;
        const int64_t rows = std::min<int64_t>(kRows, m0 + mc - row0);
        alignas(64) int32_t sums[kRows][kWidth];
        tile_rows(rows, job, row0, b, prefetch, sums);
        finish_tile_avx512(job, sums, row0, rows, p * kWidth);
      }
    }
  }
}

// 16 values of a row as fp32: bf16 widened by its bits, or fp32 as stored; lanes past `count` 0.
TQ_VNNI __m512 load16(const void* x, bool bf16, int64_t at, int64_t count) {
  const __mmask16 mask = count >= 16 ? 0xffff : static_cast<__mmask16>((1u << count) - 1);
  if (!bf16) return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(x) + at);
  const __m256i half = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(x) + at);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

// The generic quantizer's rule (int8_gemm.cpp) in vectors: the same max, the
// same product, rounding to nearest even and the same clamp.
TQ_VNNI void quantize_vnni(const void* x, bool bf16, int64_t m, int64_t k, int64_t ldx, uint8_t* out, float* scale) {
  const int64_t width = steps(k) * kDepth;
  const __m512 limit = _mm512_set1_ps(127.0f), low = _mm512_set1_ps(-127.0f);
  for (int64_t i = 0; i < m; ++i) {
    __m512 amax = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; kk += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(load16(x, bf16, i * ldx + kk, k - kk)));
    const float max = _mm512_reduce_max_ps(amax);
    const float inverse = max > 0 ? 127.0f / max : 0.0f;
    scale[i] = max / 127.0f;
    const __m512 inv = _mm512_set1_ps(inverse);
    uint8_t* row = out + i * width;
    for (int64_t kk = 0; kk < k; kk += 16) {
      const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(load16(x, bf16, i * ldx + kk, k - kk), inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i u = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(q, low), limit)), _mm512_set1_epi32(kZeroPoint));
      const int64_t count = std::min<int64_t>(16, k - kk);
      _mm_mask_storeu_epi8(row + kk, count >= 16 ? 0xffff : static_cast<__mmask16>((1u << count) - 1), _mm512_cvtepi32_epi8(u));
    }
    std::fill(row + k, row + width, kZeroPoint);
  }
}

}  // namespace

// The last step in vectors where the tile is whole; else finish_tile's loop (the same expression).
// (Scalar, a bf16 output took about half of the GEMM's time.)
TQ_VNNI void finish_tile_avx512(const Int8GemmOperands& job, const int32_t (*sums)[kWidth], int64_t row0, int64_t rows, int64_t col0) {
  if (col0 + kWidth > job.n) return finish_tile(job, sums, row0, rows, col0);
  for (int v = 0; v < kWidth / 16; ++v) {
    const __m512i offset = _mm512_loadu_si512(job.offset + col0 + v * 16);
    const __m512 w_scale = _mm512_loadu_ps(job.w_scale + col0 + v * 16);
    const __m512 bias = job.bias ? _mm512_loadu_ps(job.bias + col0 + v * 16) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = (row0 + r) * job.ldc + col0 + v * 16;
      const __m512 init = job.accumulate ? _mm512_loadu_ps(static_cast<float*>(job.out) + at) : bias;
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(job.x_scale[row0 + r]), w_scale);
      const __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(sums[r] + v * 16), offset));
      const __m512 y = _mm512_fmadd_ps(sum, scale, init);
      if (job.out_bf16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(job.out) + at), to_bf16(y));
      else _mm512_storeu_ps(static_cast<float*>(job.out) + at, y);
    }
  }
}

bool cpu_has_vnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
}

Kernel vnni_kernel() { return {panels_vnni, quantize_vnni, "avx512-vnni"}; }

}  // namespace tq::int8_gemm
#else
#include <stdexcept>
namespace tq::int8_gemm {
bool cpu_has_vnni() { return false; }
Kernel vnni_kernel() { throw std::logic_error("the int8 VNNI GEMM needs x86-64 with AVX-512 VNNI"); }
}  // namespace tq::int8_gemm
#endif
