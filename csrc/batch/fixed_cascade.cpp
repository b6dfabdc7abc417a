#include "batch/fixed_cascade.h"

#include "batch/step_buckets.h"

namespace tq {
namespace {

// Pads a level to `rows` rows, `keys` keys and `sequences` sequences (see the header).
void pad_level(CascadeLevel& level, int32_t rows, int32_t keys, int32_t sequences) {
  const int32_t spare_rows = rows - level.total_q(), spare_keys = keys - level.total_k();
  while (level.sequences() < sequences - 2) {
    level.cu_q.push_back(level.total_q());
    level.cu_k.push_back(level.total_k());
  }
  // The spare rows, without keys; then the spare keys, without rows. Index 0 is some row and key
  // of every step: they are read, never used.
  level.q_rows.insert(level.q_rows.end(), spare_rows, 0);
  level.cu_q.push_back(rows);
  level.cu_k.push_back(level.total_k());
  level.k_rows.insert(level.k_rows.end(), spare_keys, 0);
  level.cu_q.push_back(rows);
  level.cu_k.push_back(keys);
  level.max_q = rows;
  level.max_k = keys;
}

}  // namespace

bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys) {
  auto& levels = plan.levels;
  if (levels.empty() || levels.size() > 2 || levels[0].name != "own" || levels[0].total_q() != tokens) return false;
  if (levels.size() == 2 && (levels[1].name != "state" || levels[1].window_left >= 0)) return false;
  const auto own_keys = static_cast<int32_t>(power_of_two_at_least(levels[0].total_k(), 64));
  if (own_keys > kMaxFixedOwnKeys || levels.size() == 2 && levels[1].total_k() > keys) return false;
  if (levels.size() == 1) levels.push_back(CascadeLevel{"state", false, -1});
  pad_level(levels[0], tokens, own_keys, tokens + 2);
  pad_level(levels[1], tokens, keys, tokens + 2);
  plan_merge(plan, tokens);
  plan.merge_capacity = 2 * tokens;
  return true;
}

}  // namespace tq
