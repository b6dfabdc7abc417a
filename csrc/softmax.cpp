#include "softmax.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>

#include "vec_exp.h"

namespace tq {
namespace {

constexpr int kLanes = 16;  // partial maxima and sums, so the reductions vectorize

__attribute__((target_clones("avx512f", "avx2", "default"))) void softmax_row(float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float part[kLanes];
  std::fill(part, part + kLanes, kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] = std::max(part[l], x[i + l]);
  float max = kNegInf;
  for (int l = 0; l < kLanes; ++l) max = std::max(max, part[l]);
  for (; i < n; ++i) max = std::max(max, x[i]);
  if (max == kNegInf) {  // nothing visible: no such row in the engine, but stay finite
    std::fill(x, x + n, 0.0f);
    return;
  }
  std::fill(part, part + kLanes, 0.0f);
  float shifted[kExpBlock], e[kExpBlock];
  float tail = 0;
  for (int64_t a = 0; a < n; a += kExpBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kExpBlock, n - a));
    for (int j = 0; j < m; ++j) shifted[j] = x[a + j] - max;
    exp_block(shifted, e, m);
    for (int j = 0; j < m; ++j) x[a + j] = x[a + j] == kNegInf ? 0.0f : e[j];
    int j = 0;
    for (; j + kLanes <= m; j += kLanes)
      for (int l = 0; l < kLanes; ++l) part[l] += x[a + j + l];
    for (; j < m; ++j) tail += x[a + j];
  }
  float sum = tail;
  for (int l = 0; l < kLanes; ++l) sum += part[l];
  const float inv = 1.0f / sum;
  for (int64_t k = 0; k < n; ++k) x[k] *= inv;
}

}  // namespace

at::Tensor& softmax_lastdim_(at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "softmax_lastdim_: a contiguous fp32 tensor");
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(1, cols);
  float* data = x.data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)), [&](int64_t a, int64_t b) {
    for (int64_t r = a; r < b; ++r) softmax_row(data + r * cols, cols);
  });
  return x;
}

}  // namespace tq
