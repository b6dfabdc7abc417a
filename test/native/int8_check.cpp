// The int8 GEMM (csrc/kernels/cpu/gemm/int8_gemm.h) checked without torch, on the
// generic loop and, where the CPU has them, on AVX2 and on AVX-512 VNNI:
//   - quantization: the activations' u8 rows and scales (from bf16 and from
//     fp32 values), and the packed
//     weights, offsets and scales, against this file's own reading of the
//     rules in int8_gemm.h (round to nearest even, clamp at +-127, 128 added);
//   - exactness: every output equal, bit for bit, to fma(float(sum), s_x s_w,
//     init) with the sum taken here in int64 from those quantized values;
//   - invariance: each row alone, in batches of other sizes at other places,
//     and under other column splits, the same bits; accumulated onto a
//     residual as the fp32 expression says; bf16 outputs the fp32 ones rounded;
//   - the outputs' bits as a hash: the paths must agree.
// At K = 2101, 2102 and 2100 (3, 2 and no zero points past K in the last
// step), N = 150 (a last panel of 22 columns), M = 70 (a zero row among them).
// Prints one JSON line per (path, K); test/kernels/cpu.test.ts reads them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm/int8_gemm.h"

using namespace tq;
namespace q8 = tq::int8_gemm;

namespace {


// The rules of int8_gemm.h, written again.
int quantize(float v, float amax) {
  if (amax == 0) return 0;
  const float r = std::nearbyint(v * (127.0f / amax));
  return static_cast<int>(std::min(127.0f, std::max(-127.0f, r)));
}

struct Case {
  int64_t m, k, n;
  std::vector<uint16_t> x;  // bf16 activations, as the engine gives them
  std::vector<float> w, bias, residual;
  std::vector<int> qx, qw;  // this file's quantization
  std::vector<float> sx, sw;
  // The kernel's packing.
  std::vector<int8_t> panels;
  std::vector<int32_t> offset;
  std::vector<float> w_scale, bias_padded;

  Case(int64_t mm, int64_t kk, int64_t nn, uint32_t seed) : m(mm), k(kk), n(nn) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < m * k; ++i) x.push_back(bf16_of(normal(rng) * (i % 97 == 0 ? 8.0f : 1.0f)));
    for (int64_t i = 0; i < n * k; ++i) w.push_back(normal(rng) * 0.02f);
    for (int64_t j = 0; j < n; ++j) bias.push_back(normal(rng));
    for (int64_t i = 0; i < m * n; ++i) residual.push_back(normal(rng));
    for (int64_t i = 0; i < m; ++i) x[i * k + (i % k)] = 0;  // rows of mixed signs and zeros
    for (int64_t kk2 = 0; kk2 < k; ++kk2) x[5 * k + kk2] = 0;  // row 5: all zeros, scale 0
    for (int64_t i = 0; i < m; ++i) {
      float amax = 0;
      for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(value(i, c)));
      sx.push_back(amax / 127.0f);
      for (int64_t c = 0; c < k; ++c) qx.push_back(quantize(value(i, c), amax));
    }
    for (int64_t j = 0; j < n; ++j) {
      float amax = 0;
      for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(w[j * k + c]));
      sw.push_back(amax / 127.0f);
      for (int64_t c = 0; c < k; ++c) qw.push_back(quantize(w[j * k + c], amax));
    }
    const int64_t padded = q8::panels(n) * q8::kWidth;
    panels.assign(padded * q8::steps(k) * q8::kDepth, 0);
    offset.assign(padded, 0);
    w_scale.assign(padded, 0.0f);
    bias_padded.assign(padded, 0.0f);
    std::copy(bias.begin(), bias.end(), bias_padded.begin());
    q8::pack(w.data(), k, 0, 50, panels.data(), offset.data(), w_scale.data());  // in two parts, as threads do
    q8::pack(w.data(), k, 50, n, panels.data(), offset.data(), w_scale.data());
  }
  float value(int64_t i, int64_t c) const {
    const uint32_t u = static_cast<uint32_t>(x[i * k + c]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  float expected(int64_t i, int64_t j, float init) const {
    int64_t sum = 0;
    for (int64_t c = 0; c < k; ++c) sum += static_cast<int64_t>(qx[i * k + c]) * qw[j * k + c];
    return std::fma(static_cast<float>(sum), sx[i] * sw[j], init);
  }
};

struct Run {
  std::vector<uint8_t> rows;
  std::vector<float> scales;
  std::vector<float> out;
  std::vector<uint16_t> out_bf16;
};

// Rows [r0, r0 + rows) of the case, columns split at `split` panels, on kernel kn.
Run run(const q8::Kernel& kn, const Case& c, int64_t r0, int64_t rows, int64_t split, bool accumulate, bool bf16_out) {
  Run r;
  const int64_t width = q8::steps(c.k) * q8::kDepth;
  r.rows.resize(rows * width);
  r.scales.resize(rows);
  kn.quantize(c.x.data() + r0 * c.k, true, rows, c.k, c.k, r.rows.data(), r.scales.data());
  r.out.assign(rows * c.n, 0.0f);
  if (accumulate) std::copy(c.residual.begin() + r0 * c.n, c.residual.begin() + (r0 + rows) * c.n, r.out.begin());
  r.out_bf16.assign(rows * c.n, 0);
  void* out = bf16_out ? static_cast<void*>(r.out_bf16.data()) : static_cast<void*>(r.out.data());
  q8::Int8GemmOperands job{r.rows.data(), width, r.scales.data(), c.panels.data(), c.offset.data(), c.w_scale.data(),
              accumulate ? nullptr : c.bias_padded.data(), out, c.n, rows, c.k, c.n, accumulate, bf16_out};
  std::vector<uint8_t> tiles;
  if (kn.tiled_x) {  // in two calls, as threads would arrange their blocks
    tiles.assign(q8::tiled_bytes(rows, c.k), 0xa5);
    const int64_t blocks = q8::tile_blocks(rows);
    q8::arrange_tiles(job, 0, blocks / 2, tiles.data());
    q8::arrange_tiles(job, blocks / 2, blocks, tiles.data());
    job.x_tiles = tiles.data();
  }
  const int64_t p = q8::panels(c.n);
  kn.panels(job, 0, std::min(split, p));
  if (split < p) kn.panels(job, split, p);
  return r;
}

}  // namespace

int main() {
  std::vector<q8::Kernel> kernels{q8::generic_kernel()};
  if (q8::cpu_has_avx2()) kernels.push_back(q8::avx2_kernel());
  if (q8::cpu_has_vnni()) kernels.push_back(q8::vnni_kernel());
  kernels.push_back(q8::amx_model_kernel());
  if (q8::cpu_has_amx_int8()) kernels.push_back(q8::amx_kernel());
  for (int64_t k : {2101, 2102, 2100}) {
    const Case c(70, k, 150, static_cast<uint32_t>(k));
    for (const auto& kn : kernels) {
      const int64_t width = q8::steps(k) * q8::kDepth;
      int64_t quant_differing = 0, differing = 0, rows_differing = 0, bf16_differing = 0, accumulate_differing = 0, compared = 0;
      // Quantization: the activations and the packed weights.
      const Run all = run(kn, c, 0, c.m, 1, false, false);
      for (int64_t i = 0; i < c.m; ++i) {
        if (all.scales[i] != c.sx[i]) ++quant_differing;
        for (int64_t t = 0; t < width; ++t)
          if (all.rows[i * width + t] != (t < k ? c.qx[i * k + t] + 128 : 128)) ++quant_differing;
      }
      // The same values given as fp32 (an fp32 engine's activations): the same bytes and scales.
      std::vector<float> x32;
      for (int64_t i = 0; i < c.m * k; ++i) x32.push_back(c.value(i / k, i % k));
      std::vector<uint8_t> rows32(c.m * width);
      std::vector<float> scales32(c.m);
      kn.quantize(x32.data(), false, c.m, k, k, rows32.data(), scales32.data());
      if (rows32 != all.rows || scales32 != all.scales) ++quant_differing;
      for (int64_t j = 0; j < c.n; ++j) {
        int64_t sum = 0;
        if (c.w_scale[j] != c.sw[j]) ++quant_differing;
        for (int64_t t = 0; t < k; ++t) {
          const int8_t packed = c.panels[((j / q8::kWidth) * q8::steps(k) + t / 4) * q8::kWidth * 4 + (j % q8::kWidth) * 4 + t % 4];
          if (packed != c.qw[j * k + t]) ++quant_differing;
          sum += c.qw[j * k + t];
        }
        if (c.offset[j] != 128 * sum) ++quant_differing;
      }
      // Exactness, fresh (with the bias) and accumulated, and bf16 outputs.
      const Run acc = run(kn, c, 0, c.m, 2, true, false);
      const Run bf = run(kn, c, 0, c.m, 3, false, true);
      uint64_t hash = 1469598103934665603ull;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          const float y = all.out[i * c.n + j];
          if (y != c.expected(i, j, c.bias[j])) ++differing;
          if (acc.out[i * c.n + j] != c.expected(i, j, c.residual[i * c.n + j])) ++accumulate_differing;
          if (bf.out_bf16[i * c.n + j] != bf16_of(y)) ++bf16_differing;
          uint32_t u;
          std::memcpy(&u, &y, 4);
          hash = (hash ^ u) * 1099511628211ull;
        }
      // Invariance: each row alone, and in batches of other sizes at other places and column splits.
      const int64_t sizes[] = {1, 5, 7, 13, 49, 64};
      for (int64_t size : sizes)
        for (int64_t r0 = 0; r0 + size <= c.m; r0 += (size == 1 ? 1 : 11)) {
          const Run part = run(kn, c, r0, size, (r0 + size) % 3, false, false);
          for (int64_t i = 0; i < size; ++i, ++compared)
            if (std::memcmp(part.out.data() + i * c.n, all.out.data() + (r0 + i) * c.n, c.n * sizeof(float)) != 0) ++rows_differing;
        }
      std::printf(
          "{\"path\": \"%s\", \"k\": %lld, \"quantizedDiffering\": %lld, \"outputsDiffering\": %lld, \"accumulatedDiffering\": %lld, "
          "\"bf16OutputsDiffering\": %lld, \"rowsCompared\": %lld, \"rowsDiffering\": %lld, \"bits\": \"%016llx\"}\n",
          kn.name, static_cast<long long>(k), static_cast<long long>(quant_differing), static_cast<long long>(differing),
          static_cast<long long>(accumulate_differing), static_cast<long long>(bf16_differing), static_cast<long long>(compared),
          static_cast<long long>(rows_differing), static_cast<unsigned long long>(hash));
    }
  }
  return 0;
}
