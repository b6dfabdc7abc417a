#include "kernels/cpu/attention/attention_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "batch/visibility.h"
#include "kernels/cpu/attention/key_pairs.h"

namespace tq {

namespace {
// Queries per chunk: small enough that a causal prefill skips most of the
// masked triangle, large enough for GEMM (bench/README.md, "CPU attention").
constexpr int64_t kChunkQueries = 128;
// Upper bound on score elements per chunk (all heads) for long contexts, which
// bounds each thread's score buffers (fp32: 16 MiB) where an item's rows are
// scored at once (oneDNN). The invariant kernels score 48 rows at a time
// (attention_invariant.cpp), so their chunks stay whole: a shorter chunk would
// pack the same keys again for fewer queries (bench/README.md, "CPU attention").
constexpr int64_t kMaxScoreElements = int64_t{4} << 20;

// Shorter runs of unseen keys are read and masked: a hole costs a copy of the
// item's other keys and values (attention_invariant.cpp's item_rows).
constexpr int64_t kMinHoleKeys = 32;

// The longest run of keys in [from, to) that no query sees (any[j] false), as [begin, end); whole pairs
// if paired. Empty (to, to) if shorter than kMinHoleKeys.
std::pair<int64_t, int64_t> longest_hole(const bool* any, int64_t from, int64_t to, bool paired) {
  std::pair<int64_t, int64_t> best{to, to};
  for (int64_t j = from; j < to;) {
    if (any[j]) {
      ++j;
      continue;
    }
    int64_t end = j;
    while (end < to && !any[end]) ++end;
    const int64_t b = paired ? j + j % 2 : j, e = paired ? end - end % 2 : end;
    if (e - b >= kMinHoleKeys && e - b > best.second - best.first) best = {b, e};
    j = end;
  }
  return best;
}
}  // namespace

AttentionPlan plan_attention(const QueryLayout& queries, const at::Tensor& k_pos, const at::Tensor& k_seg,
                             std::optional<int64_t> window, int64_t heads, bool paired, bool invariant) {
  AttentionPlan plan;
  at::Tensor key_pos = k_pos, key_seg = k_seg;
  std::vector<int64_t> query_key_end = queries.key_end;
  if (paired) {
    auto pos = k_pos.contiguous(), seg = k_seg.contiguous();
    const int64_t n = pos.size(0);
    const auto order = pair_keys(pos.data_ptr<int64_t>(), seg.data_ptr<int64_t>(), n);
    std::vector<int64_t> gather(order.size()), place(static_cast<size_t>(n));
    for (size_t i = 0; i < order.size(); ++i) {
      gather[i] = order[i] < 0 ? n : order[i];  // a gap reads an appended row: zeros, position 0, segment -1
      if (order[i] >= 0) place[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    }
    plan.key_order = at::tensor(at::ArrayRef<int64_t>(gather), at::TensorOptions().dtype(at::kLong));
    const auto gap = [](const at::Tensor& t, int64_t v) { return at::cat({t, at::full({1}, v, t.options())}); };
    key_pos = gap(pos, 0).index_select(0, plan.key_order);
    key_seg = gap(seg, -1).index_select(0, plan.key_order);
    for (auto& e : query_key_end) e = place[static_cast<size_t>(e - 1)] + 1;
  }
  const int64_t tq = queries.positions.size(0), tk = key_pos.size(0);
  const int64_t chunk = invariant ? kChunkQueries : std::max<int64_t>(1, std::min(kChunkQueries, kMaxScoreElements / std::max<int64_t>(1, heads * tk)));
  for (int64_t a = 0; a < tq; a += chunk) {
    const int64_t b = std::min(tq, a + chunk);
    const int64_t key_end = query_key_end[b - 1];
    auto visible = visibility_mask(queries.positions.slice(0, a, b), queries.segments.slice(0, a, b), queries.parents.slice(0, a, b),
                                   queries.roots.slice(0, a, b), key_pos.slice(0, 0, key_end), key_seg.slice(0, 0, key_end), window);
    // Leading keys no query sees (behind a window), then leading keys all queries see.
    auto seen_by_any = visible.any(0), seen_by_all = visible.all(0);
    int64_t key_begin = 0, bias_begin;
    const bool* any = seen_by_any.data_ptr<bool>();
    const bool* all = seen_by_all.data_ptr<bool>();
    while (key_begin < key_end - 1 && !any[key_begin]) ++key_begin;
    if (paired) key_begin -= key_begin % 2;  // start at a pair: the key before is one no query sees
    bias_begin = key_begin;
    while (bias_begin < key_end && all[bias_begin]) ++bias_begin;
    const auto [hole_begin, hole_end] = invariant ? longest_hole(any, bias_begin, key_end, paired) : std::pair<int64_t, int64_t>{key_end, key_end};
    auto tail = at::cat({visible.slice(1, bias_begin, hole_begin), visible.slice(1, hole_end, key_end)}, 1);
    auto bias = at::zeros(tail.sizes(), at::kFloat).masked_fill_(tail.logical_not(), -std::numeric_limits<float>::infinity());
    plan.chunks.push_back({a, b, key_begin, key_end, bias_begin, hole_begin, hole_end, bias});
  }
  return plan;
}

}  // namespace tq
