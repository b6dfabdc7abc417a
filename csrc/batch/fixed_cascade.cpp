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

}  // namespace

bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys) {
  auto& tiers = plan.tiers;
  if (tiers.empty() || tiers.size() > 2 || tiers[0].name != "own" || tiers[0].total_q() != tokens) return false;
  if (tiers.size() == 2 && (tiers[1].name != "state" || tiers[1].window_left >= 0)) return false;
  // Own: a sequence per run, each run's rows. State: a sequence per state and chunk, each a state's rows (at most
  // tokens): at most kStateChunks rows per token, and at most a sequence per token and one per kStateChunkKeys keys
  // (a state's chunks past its first take that many keys each); the spare rows in up to kStateChunks more sequences.
  // As few sequences as that allows: FlashAttention-2 launches a block per sequence and head, empty ones included.
  const int32_t state_rows = kStateChunks * tokens, state_sequences = tokens + keys / kStateChunkKeys + kStateChunks + 1;
  const auto own_keys = static_cast<int32_t>(power_of_two_at_least(tiers[0].total_k(), 64));
  if (own_keys > kMaxFixedOwnKeys) return false;
  if (tiers.size() == 2 && (tiers[1].total_k() > keys || tiers[1].total_q() > state_rows ||
                             tiers[1].sequences() > state_sequences - kStateChunks - 1))
    return false;  // beyond what the bounds above allow: not expected, but never a shape of another step's
  if (tiers.size() == 1) tiers.push_back(CascadeTier{"state", false, -1});
  pad_tier(tiers[0], tokens, own_keys, tokens + 2, tokens);
  pad_tier(tiers[1], state_rows, keys, state_sequences, tokens);
  plan_merge(plan, tokens);
  plan.merge_capacity = (1 + kStateChunks) * tokens;
  return true;
}

}  // namespace tq
