#include "batch/fixed_cascade.h"

#include <algorithm>

#include "batch/step_buckets.h"

namespace tq {
namespace {

// Pads a tier to `rows` rows, `keys` keys and `sequences` sequences of at most `longest` rows (see the header).
void pad_tier(CascadeTier& tier, int32_t rows, int32_t keys, int32_t sequences, int32_t longest) {
  const int32_t spare_rows = rows - tier.total_q(), spare_keys = keys - tier.total_k();
  const int32_t spare_row_sequences = (spare_rows + longest - 1) / longest;
  while (tier.sequences() < sequences - spare_row_sequences - 1) {
    tier.cu_q.push_back(tier.total_q());
    tier.cu_k.push_back(tier.total_k());
  }
  // The spare rows, without keys, `longest` a sequence at most; then the spare keys, without rows. Index 0 is some row and
  // key of every step: they are read, never used.
  for (int32_t left = spare_rows; left > 0; left -= std::min(left, longest)) {
    tier.q_rows.insert(tier.q_rows.end(), std::min(left, longest), 0);
    tier.cu_q.push_back(static_cast<int32_t>(tier.q_rows.size()));
    tier.cu_k.push_back(tier.total_k());
  }
  tier.k_rows.insert(tier.k_rows.end(), spare_keys, 0);
  tier.cu_q.push_back(rows);
  tier.cu_k.push_back(keys);
  tier.max_q = longest;
  tier.max_k = keys;
}

int32_t power_of_two(int32_t n, int32_t floor) { return static_cast<int32_t>(power_of_two_at_least(n, floor)); }

int32_t state_sequences(const FixedCapacity& c, int32_t keys) { return c.runs + keys / kStateChunkKeys + kStateChunks + 1; }

}  // namespace

std::optional<FixedCapacity> fixed_capacity(const CascadePlan& plan, int32_t tokens, int32_t keys) {
  const auto& tiers = plan.tiers;
  if (tiers.empty() || tiers.size() > 2 || tiers[0].name != "own" || tiers[0].total_q() != tokens) return std::nullopt;
  if (tiers.size() == 2 && (tiers[1].name != "state" || tiers[1].window_left >= 0)) return std::nullopt;
  const CascadeTier* state = tiers.size() == 2 ? &tiers[1] : nullptr;
  FixedCapacity c;
  c.runs = std::min(power_of_two(tiers[0].sequences(), 4), tokens);
  c.state_rows = std::min(power_of_two(state ? state->total_q() : 0, 8), kStateChunks * tokens);
  c.own_keys = power_of_two(tiers[0].total_k(), 64);
  if (c.own_keys > kMaxFixedOwnKeys) return std::nullopt;
  // Beyond what the header's bounds allow: not expected, but never a shape of another step's.
  if (state && (state->total_k() > keys || state->total_q() > c.state_rows || state->sequences() > state_sequences(c, keys) - kStateChunks - 1))
    return std::nullopt;
  return c;
}

bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys) {
  const auto c = fixed_capacity(plan, tokens, keys);
  if (!c) return false;
  auto& tiers = plan.tiers;
  if (tiers.size() == 1) tiers.push_back(CascadeTier{"state", false, -1});
  pad_tier(tiers[0], tokens, c->own_keys, c->runs + 1, tokens);
  pad_tier(tiers[1], c->state_rows, keys, state_sequences(*c, keys), std::min(tokens, c->state_rows));
  plan_merge(plan, tokens);
  plan.merge_capacity = tokens + c->state_rows;
  return true;
}

}  // namespace tq
