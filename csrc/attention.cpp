#include "attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tq {

namespace {
// Upper bound on score-matrix elements per query chunk (fp32: 256 MiB).
constexpr int64_t kMaxScoreElements = int64_t{64} << 20;
}  // namespace

at::Tensor visibility_mask(const at::Tensor& q_pos, const at::Tensor& q_seg, const at::Tensor& k_pos,
                           const at::Tensor& k_seg, std::optional<int64_t> window) {
  auto qp = q_pos.unsqueeze(1), kp = k_pos.unsqueeze(0);
  auto mask = kp.le(qp).logical_and_(k_seg.unsqueeze(0).eq(0).logical_or(k_seg.unsqueeze(0).eq(q_seg.unsqueeze(1))));
  if (window) mask.logical_and_((qp - kp).lt(*window));
  return mask;
}

at::Tensor attention(const AttentionInputs& in) {
  const int64_t tq = in.q.size(0), heads = in.q.size(1), dim = in.q.size(2);
  const int64_t tk = in.k.size(0), kv_heads = in.k.size(1);
  const int64_t group = heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  auto k_t = in.k.permute({1, 2, 0}).contiguous();  // [kv_heads, dim, Tk]
  auto v = in.v.permute({1, 0, 2}).contiguous();    // [kv_heads, Tk, dim]
  const int64_t chunk = std::max<int64_t>(1, kMaxScoreElements / std::max<int64_t>(1, heads * tk));
  auto out = at::empty({tq, heads, dim}, in.q.options());
  for (int64_t a = 0; a < tq; a += chunk) {
    const int64_t b = std::min(tq, a + chunk), c = b - a;
    // Query heads sharing a KV head are stacked so one bmm serves the group.
    auto q = (in.q.slice(0, a, b) * scale).view({c, kv_heads, group, dim}).permute({1, 2, 0, 3}).reshape({kv_heads, group * c, dim});
    auto scores = at::bmm(q, k_t).to(at::kFloat).view({kv_heads, group, c, tk});
    auto mask = visibility_mask(in.q_pos.slice(0, a, b), in.q_seg.slice(0, a, b), in.k_pos, in.k_seg, in.window);
    scores.masked_fill_(mask.logical_not(), -std::numeric_limits<float>::infinity());
    auto probs = at::softmax(scores, -1).to(v.scalar_type()).view({kv_heads, group * c, tk});
    auto o = at::bmm(probs, v);  // [kv_heads, group * c, dim]
    out.slice(0, a, b).copy_(o.view({kv_heads, group, c, dim}).permute({2, 0, 1, 3}).reshape({c, heads, dim}));
  }
  return out;
}

}  // namespace tq
