#include "kernels/cpu/attention/attention_reference.h"

#include <cmath>
#include <limits>
#include <vector>

namespace tq {

at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible, double softcap) {
  const auto Q = q.to(at::kDouble).contiguous(), K = k.to(at::kDouble).contiguous(), V = v.to(at::kDouble).contiguous();
  const auto seen = visible.to(at::kBool).contiguous();
  const int64_t queries = q.size(0), heads = q.size(1), dim = q.size(2), keys = k.size(0), kv_heads = k.size(1);
  const auto qa = Q.accessor<double, 3>(), ka = K.accessor<double, 3>(), va = V.accessor<double, 3>();
  const auto sa = seen.accessor<bool, 2>();
  auto out = at::zeros({queries, heads, dim}, at::kDouble);
  auto oa = out.accessor<double, 3>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  std::vector<double> weight(static_cast<size_t>(keys));
  for (int64_t t = 0; t < queries; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h / (heads / kv_heads);
      // Scores of the keys this query sees; the others weigh nothing.
      double largest = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < keys; ++j) {
        if (!sa[t][j]) continue;
        double s = 0;
        for (int64_t d = 0; d < dim; ++d) s += qa[t][h][d] * ka[j][kv][d];
        s *= scale;
        if (softcap > 0) s = softcap * std::tanh(s / softcap);
        weight[static_cast<size_t>(j)] = s;
        largest = std::max(largest, s);
      }
      // Softmax (shifted by the largest score, which leaves it unchanged), then the weighted sum of values.
      double sum = 0;
      for (int64_t j = 0; j < keys; ++j) {
        if (!sa[t][j]) continue;
        weight[static_cast<size_t>(j)] = std::exp(weight[static_cast<size_t>(j)] - largest);
        sum += weight[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < keys; ++j) {
        if (!sa[t][j]) continue;
        const double p = weight[static_cast<size_t>(j)] / sum;
        for (int64_t d = 0; d < dim; ++d) oa[t][h][d] += p * va[j][kv][d];
      }
    }
  }
  return out.to(at::kFloat);
}

}  // namespace tq
