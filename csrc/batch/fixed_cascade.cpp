#include "batch/fixed_cascade.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

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
  if (tier.sequences() != sequences) throw std::logic_error("fix_cascade_shape: a tier's sequences outgrew their capacity");
}

int32_t power_of_two(int32_t n, int32_t floor) { return static_cast<int32_t>(power_of_two_at_least(n, floor)); }

// A capacity where a tier may be absent: none for none.
int32_t capacity_of(int32_t n, int32_t floor) { return n == 0 ? 0 : power_of_two(n, floor); }

// The most spare rows a tier of `capacity` rows holds: a row capacity is the power of two at or above the rows (from
// kRowsFloor, at most a bound they never pass), so more than half of it is rows, but at the floor.
constexpr int32_t kRowsFloor = 8;
int32_t most_spare_rows(int32_t capacity) { return capacity <= kRowsFloor ? capacity : capacity / 2; }

// A tier's sequences in the fixed form: its own, room for `spare_rows` rows in sequences of `longest` rows at most,
// and one for the spare keys.
int32_t padded_sequences(int32_t sequences, int32_t spare_rows, int32_t longest) { return sequences + (spare_rows + longest - 1) / longest + 1; }

const CascadeTier* named(const CascadePlan& plan, const char* name) {
  for (const auto& tier : plan.tiers)
    if (tier.name == name) return &tier;
  return nullptr;
}

// A tier the step lacks, as the fixed form holds it: no rows, keys or sequences, its launch skipped.
CascadeTier absent(const char* name, bool causal, int32_t window_left) { return CascadeTier{name, causal, window_left}; }

}  // namespace

std::optional<FixedCapacity> fixed_capacity(const CascadePlan& plan, int32_t tokens, int32_t keys) {
  const CascadeTier *own = named(plan, "own"), *questions = named(plan, "own-questions"), *state = named(plan, "state");
  const size_t expected = (own != nullptr) + (questions != nullptr) + (state != nullptr);
  if (plan.tiers.size() != expected || (state && state->window_left >= 0)) return std::nullopt;
  const int32_t own_rows = own ? own->total_q() : 0, question_rows = questions ? questions->total_q() : 0;
  if (own_rows + question_rows != tokens || (!plan.questions_apart && !own)) return std::nullopt;
  FixedCapacity c;
  c.own_rows = plan.questions_apart ? std::min(capacity_of(own_rows, kRowsFloor), tokens) : tokens;
  if (own) {
    c.runs = std::min(power_of_two(own->sequences(), 1), tokens);
    c.own_longest = std::min(power_of_two(own->max_q, kRowsFloor), c.own_rows);
    c.own_keys = power_of_two(own->total_k(), 64);
  }
  if (questions) {
    c.question_rows = std::min(capacity_of(question_rows, kRowsFloor), tokens);
    c.question_runs = std::min(power_of_two(questions->sequences(), 1), tokens);
    c.question_longest = std::min(power_of_two(questions->max_q, kRowsFloor), c.question_rows);
    c.question_keys = power_of_two(questions->total_k(), 64);
  }
  c.state_rows = std::min(power_of_two(state ? state->total_q() : 0, kRowsFloor), kStateChunks * tokens);
  c.state_sequences = state ? power_of_two(state->sequences(), 1) : 0;
  c.state_longest = std::min(power_of_two(state ? state->max_q : 0, kRowsFloor), c.state_rows);
  // The fixed form adds no entry (its spare rows see no keys), so it writes the plan's rows.
  c.merge_written = std::min(power_of_two(static_cast<int32_t>(plan.merge_written.size()), kRowsFloor), tokens);
  if (c.own_keys > kMaxFixedOwnKeys || c.question_keys > kMaxFixedOwnKeys) return std::nullopt;
  // Beyond what the header's bounds allow: not expected, but never a shape of another step's.
  if (state && (state->total_k() > keys || state->total_q() > c.state_rows)) return std::nullopt;
  return c;
}

bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys) {
  const auto c = fixed_capacity(plan, tokens, keys);
  if (!c) return false;
  const CascadeTier *own = named(plan, "own"), *questions = named(plan, "own-questions"), *state = named(plan, "state");
  const int32_t own_window = (own ? own : questions)->window_left;
  std::vector<CascadeTier> tiers;
  tiers.push_back(own ? *own : absent("own", true, own_window));
  if (plan.questions_apart) tiers.push_back(questions ? *questions : absent("own-questions", true, own_window));
  tiers.push_back(state ? *state : absent("state", false, -1));
  // Sequences: the step's, then the spare rows' (none in an own tier of every row), then the spare keys'. Each tier's
  // longest sequence is its own capacity: FlashAttention-2 launches ceil(longest / 128) blocks for every sequence and
  // head, so the step's sequences are few and short beside its bucket, and the grid is the step's work.
  if (c->own_rows > 0) {
    const int32_t spare = plan.questions_apart ? most_spare_rows(c->own_rows) : 0;
    pad_tier(tiers[0], c->own_rows, c->own_keys, padded_sequences(c->runs, spare, c->own_longest), c->own_longest);
  }
  if (c->question_rows > 0)
    pad_tier(tiers[1], c->question_rows, c->question_keys, padded_sequences(c->question_runs, most_spare_rows(c->question_rows), c->question_longest),
             c->question_longest);
  pad_tier(tiers.back(), c->state_rows, keys, padded_sequences(c->state_sequences, most_spare_rows(c->state_rows), c->state_longest), c->state_longest);
  plan.tiers = std::move(tiers);
  plan_merge(plan, tokens);
  plan.merge_capacity = tokens + c->state_rows;
  plan.merge_written_capacity = c->merge_written;
  return true;
}

}  // namespace tq
