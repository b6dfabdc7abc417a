#include "batch/cascade_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace tq {
namespace {

// Where a segment's keys are in the step's key list: [begin, end), the first at `position`.
struct SegmentKeys {
  int32_t begin = -1, end = -1;
  int64_t position = 0;
};

// By segment id (ids are sparse: a bucketed step's padding has a large one, batch/step_buckets.h).
using SegmentKeyMap = std::unordered_map<int64_t, SegmentKeys>;

SegmentKeyMap segment_keys(const at::Tensor& key_positions, const at::Tensor& key_segments) {
  const auto pos = key_positions.contiguous(), seg = key_segments.contiguous();
  const int64_t* p = pos.data_ptr<int64_t>();
  const int64_t* s = seg.data_ptr<int64_t>();
  const int64_t n = pos.size(0);
  SegmentKeyMap out;
  SegmentKeys* k = nullptr;  // the segment of the key before: looked up again only where the segment changes
  for (int64_t j = 0; j < n; ++j) {
    if (j == 0 || s[j] != s[j - 1]) {
      k = &out[s[j]];
      if (k->begin < 0) *k = {static_cast<int32_t>(j), static_cast<int32_t>(j), p[j]};
    }
    if (k->end != j || p[j] != k->position + (j - k->begin)) throw std::logic_error("plan_cascade: a segment's keys are not one run by position");
    k->end = static_cast<int32_t>(j + 1);
  }
  return out;
}

// A run of query rows of one segment at consecutive positions.
struct Run {
  int32_t first_row, rows;
  int64_t segment, parent, root, position;
};

std::vector<Run> query_runs(const QueryLayout& q) {
  const auto pos = q.positions.contiguous(), seg = q.segments.contiguous(), par = q.parents.contiguous(), root = q.roots.contiguous();
  const int64_t *p = pos.data_ptr<int64_t>(), *s = seg.data_ptr<int64_t>(), *a = par.data_ptr<int64_t>(), *r = root.data_ptr<int64_t>();
  std::vector<Run> runs;
  for (int64_t i = 0; i < pos.size(0); ++i) {
    if (!runs.empty()) {
      auto& last = runs.back();
      if (last.segment == s[i] && last.position + last.rows == p[i]) {
        ++last.rows;
        continue;
      }
    }
    runs.push_back({static_cast<int32_t>(i), 1, s[i], a[i], r[i], p[i]});
  }
  return runs;
}

void append_range(std::vector<int32_t>& to, int32_t begin, int32_t end) {
  for (int32_t j = begin; j < end; ++j) to.push_back(j);
}

// Closes the sequence whose rows and keys were appended since the last one.
void end_sequence(CascadeTier& tier) {
  const int32_t q = static_cast<int32_t>(tier.q_rows.size()), k = static_cast<int32_t>(tier.k_rows.size());
  tier.max_q = std::max(tier.max_q, q - tier.cu_q.back());
  tier.max_k = std::max(tier.max_k, k - tier.cu_k.back());
  tier.cu_q.push_back(q);
  tier.cu_k.push_back(k);
}

// The run's rows over its lineage below the state, causally: its parent's keys when the parent
// is a shared segment, then its own up to its last row. Positions run on from parent to child,
// so the run's rows are the sequence's last keys and bottom-right alignment is causality.
void add_own(const Run& run, const SegmentKeyMap& keys, CascadeTier& own) {
  const auto& mine = keys.at(run.segment);
  if (run.parent != run.segment && run.parent != run.root) {
    const auto& parent = keys.at(run.parent);
    append_range(own.k_rows, parent.begin, parent.end);
  }
  const int64_t last = run.position + run.rows - 1;
  append_range(own.k_rows, mine.begin, mine.begin + static_cast<int32_t>(last - mine.position) + 1);
  append_range(own.q_rows, run.first_row, run.first_row + run.rows);
  end_sequence(own);
}

// The state tier's chunk of a state of n keys: at most kStateChunks chunks of at least kStateChunkKeys keys, each a
// multiple of 64 (FlashAttention-2's key block) from the state's first key. A function of the state alone, so a row's
// chunks, and the order its merge takes them in, are the same in any batch, step or cache.
int32_t state_chunk_keys(int32_t n) {
  const int32_t chunks = std::max(1, std::min(kStateChunks, n / kStateChunkKeys));
  const int32_t per = (n + chunks - 1) / chunks;
  return (per + 63) / 64 * 64;
}

}  // namespace

KeyRange visible_keys(const CascadeTier& tier, int32_t seq, int32_t row) {
  const int32_t nq = tier.cu_q[seq + 1] - tier.cu_q[seq], nk = tier.cu_k[seq + 1] - tier.cu_k[seq];
  const int32_t aligned = row + nk - nq;
  const int32_t last = tier.causal ? std::min(aligned, nk - 1) : nk - 1;
  const int32_t first = tier.window_left < 0 ? 0 : std::max(0, aligned - tier.window_left);
  return {first, last};
}

CascadePlan plan_cascade(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                         std::optional<int64_t> window, bool questions_apart) {
  const auto keys = segment_keys(key_positions, key_segments);
  const auto runs = query_runs(queries);
  const int32_t own_window = window ? static_cast<int32_t>(*window - 1) : -1;
  CascadeTier own{"own", true, own_window}, own_questions{"own-questions", true, own_window};
  CascadeTier state{"state", false, -1};
  std::map<int32_t, CascadeTier> windowed;  // the state tier cut by window, per window_left
  std::map<int64_t, std::vector<int32_t>> state_rows;  // per state: rows that see all its keys
  for (const auto& run : runs) {
    const bool states_run = run.segment == run.root;
    add_own(run, keys, questions_apart && !states_run ? own_questions : own);
    if (states_run) continue;
    const auto& root = keys.at(run.root);
    const int64_t n = root.end - root.begin;  // the state's keys, positions 0 .. n - 1
    // Row i (position p0 + i) sees state keys from p0 + i - W + 1 on.
    const int64_t p0 = run.position, low = window ? p0 - *window + 1 : 0;
    if (!window || low + run.rows - 1 <= 0) {
      auto& rows = state_rows[run.root];
      for (int32_t i = 0; i < run.rows; ++i) rows.push_back(run.first_row + i);
      continue;
    }
    // Windowed: keys from the first row's first on; rows that still see one.
    const int64_t from = std::max<int64_t>(0, low);
    if (from >= n) continue;
    const int64_t nk = n - from, nq = std::min<int64_t>(run.rows, n + *window - 1 - p0);
    const auto window_left = static_cast<int32_t>(nk - nq - (low - from));
    auto& tier = windowed.try_emplace(window_left, CascadeTier{"state", false, window_left}).first->second;
    append_range(tier.k_rows, root.begin + static_cast<int32_t>(from), root.end);
    append_range(tier.q_rows, run.first_row, run.first_row + static_cast<int32_t>(nq));
    end_sequence(tier);
  }
  // A state's rows over its keys, chunk by chunk, each chunk a sequence: one kernel block per head walked the whole
  // state where a state's rows are few (a question's), and the chunks run side by side; the merge takes them in order.
  for (const auto& [root, rows] : state_rows) {
    const auto& k = keys.at(root);
    const int32_t n = k.end - k.begin;
    if (n == 0) continue;
    const int32_t chunk = state_chunk_keys(n);
    for (int32_t from = 0; from < n; from += chunk) {
      append_range(state.k_rows, k.begin + from, k.begin + std::min(n, from + chunk));
      state.q_rows.insert(state.q_rows.end(), rows.begin(), rows.end());
      end_sequence(state);
    }
  }

  CascadePlan plan;
  plan.questions_apart = questions_apart;
  for (auto* tier : {&own, &own_questions, &state})
    if (tier->total_q() > 0) plan.tiers.push_back(std::move(*tier));
  for (auto& [wl, tier] : windowed) plan.tiers.push_back(std::move(tier));
  plan_merge(plan, queries.positions.size(0));
  return plan;
}

void plan_merge(CascadePlan& plan, int64_t tq) {
  // Two passes over the tiers' rows, in tier order: each query row's entries counted, then placed (a row's entries
  // in tier order, as the merge takes them), with no list per row: a step is planned before every launch.
  const auto each_entry = [&](auto&& visit) {
    for (int32_t l = 0; l < static_cast<int32_t>(plan.tiers.size()); ++l) {
      const auto& tier = plan.tiers[l];
      for (int32_t s = 0; s < tier.sequences(); ++s)
        for (int32_t r = tier.cu_q[s]; r < tier.cu_q[s + 1]; ++r)
          if (visible_keys(tier, s, r - tier.cu_q[s]).count() > 0) visit(l, r, tier.q_rows[r]);
    }
  };
  plan.merge_begin.assign(static_cast<size_t>(tq) + 1, 0);
  each_entry([&](int32_t, int32_t, int32_t row) { ++plan.merge_begin[static_cast<size_t>(row) + 1]; });
  plan.max_entries = 0;
  for (size_t row = 1; row < plan.merge_begin.size(); ++row) {
    plan.max_entries = std::max(plan.max_entries, plan.merge_begin[row]);
    plan.merge_begin[row] += plan.merge_begin[row - 1];
  }
  plan.merge_tier.resize(static_cast<size_t>(plan.merge_begin.back()));
  plan.merge_row.resize(plan.merge_tier.size());
  std::vector<int32_t> next(plan.merge_begin.begin(), plan.merge_begin.end() - 1);
  each_entry([&](int32_t l, int32_t r, int32_t row) {
    const int32_t at = next[static_cast<size_t>(row)]++;
    plan.merge_tier[static_cast<size_t>(at)] = l;
    plan.merge_row[static_cast<size_t>(at)] = r;
  });
  plan.merge_written.clear();
  for (int32_t row = 0; row + 1 < static_cast<int32_t>(plan.merge_begin.size()); ++row) {
    const int32_t first = plan.merge_begin[row], n = plan.merge_begin[row + 1] - first;
    if (n != 1 || plan.merge_tier[first] != 0 || plan.merge_row[first] != row) plan.merge_written.push_back(row);
  }
}

at::Tensor cascade_visibility(const CascadePlan& plan, int64_t queries, int64_t keys) {
  auto seen = at::zeros({queries, keys}, at::kInt);
  auto* m = seen.data_ptr<int32_t>();
  for (const auto& tier : plan.tiers)
    for (int32_t s = 0; s < tier.sequences(); ++s)
      for (int32_t r = tier.cu_q[s]; r < tier.cu_q[s + 1]; ++r) {
        const auto range = visible_keys(tier, s, r - tier.cu_q[s]);
        for (int32_t j = range.first; j <= range.last; ++j) m[tier.q_rows[r] * keys + tier.k_rows[tier.cu_k[s] + j]] += 1;
      }
  return seen;
}

}  // namespace tq
