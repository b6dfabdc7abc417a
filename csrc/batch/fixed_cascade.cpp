#include "batch/fixed_cascade.h"

#include <algorithm>

#include "batch/step_buckets.h"

namespace tq {
namespace {

// Pads a level to `rows` rows, `keys` keys and `sequences` sequences of at most `longest` rows (see the header).
void pad_level(CascadeLevel& level, int32_t rows, int32_t keys, int32_t sequences, int32_t longest) {
  const int32_t spare_rows = rows - level.total_q(), spare_keys = keys - level.total_k();
  const int32_t spare_row_sequences = (spare_rows + longest - 1) / longest;
  while (level.sequences() < sequences - spare_row_sequences - 1) {
    level.cu_q.push_back(level.total_q());
    level.cu_k.push_back(level.total_k());
  }
  // The spare rows, without keys, `longest` a sequence at most; then the spare keys, without rows. Index 0 is some row and
  // key of every step: they are read, never used.
  for (int32_t left = spare_rows; left > 0; left -= std::min(left, longest)) {
    level.q_rows.insert(level.q_rows.end(), std::min(left, longest), 0);
    level.cu_q.push_back(static_cast<int32_t>(level.q_rows.size()));
    level.cu_k.push_back(level.total_k());
  }
  level.k_rows.insert(level.k_rows.end(), spare_keys, 0);
  level.cu_q.push_back(rows);
  level.cu_k.push_back(keys);
  level.max_q = longest;
  level.max_k = keys;
}

}  // namespace

bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys) {
  auto& levels = plan.levels;
  if (levels.empty() || levels.size() > 2 || levels[0].name != "own" || levels[0].total_q() != tokens) return false;
  if (levels.size() == 2 && (levels[1].name != "state" || levels[1].window_left >= 0)) return false;
  // Own: a sequence per run, each run's rows. State: a sequence per state and chunk, each a state's rows (at most
  // tokens): at most kStateChunks rows per token, and at most a sequence per token and one per kStateChunkKeys keys
  // (a state's chunks past its first take that many keys each); the spare rows in up to kStateChunks more sequences.
  // As few sequences as that allows: FlashAttention-2 launches a block per sequence and head, empty ones included.
  const int32_t state_rows = kStateChunks * tokens, state_sequences = tokens + keys / kStateChunkKeys + kStateChunks + 1;
  const auto own_keys = static_cast<int32_t>(power_of_two_at_least(levels[0].total_k(), 64));
  if (own_keys > kMaxFixedOwnKeys) return false;
  if (levels.size() == 2 && (levels[1].total_k() > keys || levels[1].total_q() > state_rows ||
                             levels[1].sequences() > state_sequences - kStateChunks - 1))
    return false;  // beyond what the bounds above allow: not expected, but never a shape of another step's
  if (levels.size() == 1) levels.push_back(CascadeLevel{"state", false, -1});
  pad_level(levels[0], tokens, own_keys, tokens + 2, tokens);
  pad_level(levels[1], state_rows, keys, state_sequences, tokens);
  plan_merge(plan, tokens);
  plan.merge_capacity = (1 + kStateChunks) * tokens;
  return true;
}

}  // namespace tq
