#include "attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "softmax.h"

namespace tq {

namespace {
// Queries per chunk: small enough that a causal prefill skips most of the
// masked triangle and the score block stays in cache, large enough for GEMM.
constexpr int64_t kChunkQueries = 128;
// Upper bound on score elements per chunk for long contexts (fp32: 16 MiB).
// Below glibc's largest mmap threshold (32 MiB), freed score blocks are reused
// from the heap instead of being mapped and page-faulted afresh per chunk.
constexpr int64_t kMaxScoreElements = int64_t{4} << 20;
}  // namespace

at::Tensor visibility_mask(const at::Tensor& q_pos, const at::Tensor& q_seg, const at::Tensor& q_root, const at::Tensor& k_pos,
                           const at::Tensor& k_seg, std::optional<int64_t> window) {
  auto qp = q_pos.unsqueeze(1), kp = k_pos.unsqueeze(0), ks = k_seg.unsqueeze(0);
  auto mask = kp.le(qp).logical_and_(ks.eq(q_seg.unsqueeze(1)).logical_or_(ks.eq(q_root.unsqueeze(1))));
  if (window) mask.logical_and_((qp - kp).lt(*window));
  return mask;
}

AttentionPlan plan_attention(const QueryLayout& queries, const at::Tensor& k_pos, const at::Tensor& k_seg,
                             std::optional<int64_t> window, int64_t heads) {
  const int64_t tq = queries.positions.size(0), tk = k_pos.size(0);
  const int64_t chunk = std::max<int64_t>(1, std::min(kChunkQueries, kMaxScoreElements / std::max<int64_t>(1, heads * tk)));
  AttentionPlan plan;
  for (int64_t a = 0; a < tq; a += chunk) {
    const int64_t b = std::min(tq, a + chunk);
    const int64_t key_end = queries.key_end[b - 1];
    auto visible = visibility_mask(queries.positions.slice(0, a, b), queries.segments.slice(0, a, b), queries.roots.slice(0, a, b), k_pos.slice(0, 0, key_end),
                                   k_seg.slice(0, 0, key_end), window);
    // Leading keys no query sees (behind a window), then leading keys all queries see.
    auto seen_by_any = visible.any(0), seen_by_all = visible.all(0);
    int64_t key_begin = 0, bias_begin;
    const bool* any = seen_by_any.data_ptr<bool>();
    const bool* all = seen_by_all.data_ptr<bool>();
    while (key_begin < key_end - 1 && !any[key_begin]) ++key_begin;
    bias_begin = key_begin;
    while (bias_begin < key_end && all[bias_begin]) ++bias_begin;
    auto tail = visible.slice(1, bias_begin, key_end);
    auto bias = at::zeros(tail.sizes(), at::kFloat).masked_fill_(tail.logical_not(), -std::numeric_limits<float>::infinity());
    plan.chunks.push_back({a, b, key_begin, key_end, bias_begin, bias});
  }
  return plan;
}

at::Tensor attention(const at::Tensor& q_all, const at::Tensor& k, const at::Tensor& v_all, const AttentionPlan& plan) {
  const int64_t heads = q_all.size(1), dim = q_all.size(2), kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  auto k_t = k.permute({1, 2, 0}).contiguous();  // [kv_heads, dim, Tk]
  auto v = v_all.permute({1, 0, 2}).contiguous();  // [kv_heads, Tk, dim]
  auto out = at::empty(q_all.sizes(), q_all.options());
  for (const auto& ch : plan.chunks) {
    const int64_t c = ch.end - ch.begin, tk = ch.key_end - ch.key_begin;
    // Query heads sharing a KV head are stacked so one bmm serves the group.
    auto q = (q_all.slice(0, ch.begin, ch.end) * scale).view({c, kv_heads, group, dim}).permute({1, 2, 0, 3}).reshape({kv_heads, group * c, dim});
    auto scores = at::bmm(q, k_t.slice(2, ch.key_begin, ch.key_end)).to(at::kFloat).view({kv_heads, group, c, tk});
    if (ch.bias.numel() > 0) scores.slice(3, ch.bias_begin - ch.key_begin).add_(ch.bias);
    auto probs = softmax_lastdim_(scores).to(v.scalar_type()).view({kv_heads, group * c, tk});
    auto o = at::bmm(probs, v.slice(1, ch.key_begin, ch.key_end));  // [kv_heads, group * c, dim]
    out.slice(0, ch.begin, ch.end).copy_(o.view({kv_heads, group, c, dim}).permute({2, 0, 1, 3}).reshape({c, heads, dim}));
  }
  return out;
}

}  // namespace tq
