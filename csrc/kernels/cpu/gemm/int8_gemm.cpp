// The int8 GEMM's packing, its shared last step and its generic path
// (int8_gemm.h has the math). The generic path is the reference the VNNI
// micro-kernel is checked against (the same bits), and what runs on CPUs
// without AVX-512 VNNI: correct, and about as slow as the generic bf16 path.
#include "kernels/cpu/gemm/int8_gemm.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/bf16.h"

namespace tq::int8_gemm {
namespace {

// 127 / max|row| (0 for a row of zeros) and the dequantizing scale max|row| / 127.
struct RowScale {
  float inverse, scale;
};
RowScale row_scale(float amax) { return {amax > 0 ? 127.0f / amax : 0.0f, amax / 127.0f}; }

// Rounds to nearest even as nearbyint does in the default rounding mode (and as the VNNI path's
// roundscale), without a libm call per value: |v * inverse| <= 127.5 here, far below 2^22, where
// adding and taking away 1.5 * 2^23 leaves the rounded value. (Packing bench-llama's weights with
// nearbyint took 3.0 s.)
int8_t quantized(float v, float inverse) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const float r = (v * inverse + kMagic) - kMagic;
  return static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
}

float value_at(const void* x, bool bf16, int64_t i) {
  if (!bf16) return static_cast<const float*>(x)[i];
  const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(x)[i]) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

void quantize_generic(const void* x, bool bf16, int64_t m, int64_t k, int64_t ldx, uint8_t* out, float* scale) {
  const int64_t width = steps(k) * kDepth;
  for (int64_t i = 0; i < m; ++i) {
    float amax = 0;
    for (int64_t kk = 0; kk < k; ++kk) amax = std::max(amax, std::fabs(value_at(x, bf16, i * ldx + kk)));
    const auto s = row_scale(amax);
    scale[i] = s.scale;
    uint8_t* row = out + i * width;
    for (int64_t kk = 0; kk < k; ++kk) row[kk] = static_cast<uint8_t>(quantized(value_at(x, bf16, i * ldx + kk), s.inverse) + kZeroPoint);
    std::fill(row + k, row + width, kZeroPoint);
  }
}

// Row by row: one row's 64 sums over every step of the panel, then the last step.
void panels_generic(const Int8GemmOperands& job, int64_t p_begin, int64_t p_end) {
  const int64_t n_steps = steps(job.k);
  int32_t acc[1][kWidth];
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int8_t* panel = job.panels + p * n_steps * kWidth * kDepth;
    for (int64_t i = 0; i < job.m; ++i) {
      const uint8_t* x = job.x + i * job.ldx;
      std::fill(acc[0], acc[0] + kWidth, 0);
      for (int64_t s = 0; s < n_steps; ++s) {
        const int8_t* w = panel + s * kWidth * kDepth;
        for (int64_t c = 0; c < kWidth; ++c)
          for (int64_t t = 0; t < kDepth; ++t) acc[0][c] += static_cast<int32_t>(x[s * kDepth + t]) * w[c * kDepth + t];
      }
      finish_tile(job, acc, i, 1, p * kWidth);
    }
  }
}

}  // namespace

void finish_tile(const Int8GemmOperands& job, const int32_t (*acc)[kWidth], int64_t row0, int64_t rows, int64_t col0) {
  const int64_t cols = std::min(kWidth, job.n - col0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = row0 + r;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t j = col0 + c;
      float init = job.bias ? job.bias[j] : 0.0f;
      if (job.accumulate) init = static_cast<float*>(job.out)[i * job.ldc + j];
      const float y = finish(acc[r][c], job.offset[j], job.x_scale[i], job.w_scale[j], init);
      if (job.out_bf16) {
        uint32_t bits;
        std::memcpy(&bits, &y, sizeof bits);
        static_cast<uint16_t*>(job.out)[i * job.ldc + j] = bf16_bits(bits);
      } else {
        static_cast<float*>(job.out)[i * job.ldc + j] = y;
      }
    }
  }
}

Kernel generic_kernel() { return {panels_generic, quantize_generic, "generic"}; }

void arrange_tiles(const Int8GemmOperands& job, int64_t b_begin, int64_t b_end, uint8_t* to) {
  const int64_t groups = tile_groups(job.k), row_bytes = steps(job.k) * kDepth, piece = kGroupSteps * kDepth;
  for (int64_t b = b_begin; b < b_end; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* tile = to + (b * groups + g) * kGroupBytes;
      const int64_t bytes = std::min(piece, row_bytes - g * piece);
      for (int64_t r = 0; r < kBlockRows; ++r) {
        const int64_t row = b * kBlockRows + r;
        uint8_t* dst = tile + r * piece;
        const int64_t kept = row < job.m ? bytes : 0;
        if (kept) std::memcpy(dst, job.x + row * job.ldx + g * piece, kept);
        std::memset(dst + kept, 0, piece - kept);
      }
    }
}

void pack(const float* w, int64_t k, int64_t j_begin, int64_t j_end, int8_t* panels, int32_t* offset, float* w_scale) {
  const int64_t n_steps = steps(k);
  for (int64_t j = j_begin; j < j_end; ++j) {
    const float* row = w + j * k;
    float amax = 0;
    for (int64_t kk = 0; kk < k; ++kk) amax = std::max(amax, std::fabs(row[kk]));
    const auto s = row_scale(amax);
    w_scale[j] = s.scale;
    int8_t* column = panels + (j / kWidth) * n_steps * kWidth * kDepth + (j % kWidth) * kDepth;
    int32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int8_t q = quantized(row[kk], s.inverse);
      column[(kk / kDepth) * kWidth * kDepth + kk % kDepth] = q;
      sum += q;
    }
    offset[j] = kZeroPoint * sum;
  }
}

}  // namespace tq::int8_gemm
