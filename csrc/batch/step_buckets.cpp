#include "batch/step_buckets.h"

namespace tq {
namespace {

// t's rows followed by `n` rows of `fill` (t int64, 1-D or [T, 3]).
at::Tensor padded(const at::Tensor& t, int64_t n, int64_t fill) {
  if (n == 0) return t;
  auto shape = t.sizes().vec();
  shape[0] = n;
  return at::cat({t, at::full(shape, fill, t.options())});
}

// n values a, a + 1, ...
at::Tensor run_from(int64_t a, int64_t n) { return at::arange(a, a + n, at::TensorOptions().dtype(at::kLong)); }

}  // namespace

int64_t power_of_two_at_least(int64_t n, int64_t floor) {
  int64_t p = floor;
  while (p < n) p *= 2;
  return p;
}

int64_t bucket_tokens(int64_t n) {
  if (n <= 256) return power_of_two_at_least(n, 8);
  const int64_t quarter = power_of_two_at_least(n, 256) / 8;  // a quarter of the octave n lies in (256 -> 512: 64)
  return (n + quarter - 1) / quarter * quarter;
}

std::optional<StepBucket> bucket_for(int64_t tokens, int64_t keys) {
  if (tokens > kMaxBucketTokens) return std::nullopt;
  StepBucket b;
  b.tokens = bucket_tokens(tokens);
  b.keys = power_of_two_at_least(keys + (b.tokens - tokens), 64);
  if (b.keys > kMaxBucketKeys) return std::nullopt;
  return b;
}

void pad_step(StepBatch& s, const StepBucket& bucket, int64_t scratch_slot) {
  const int64_t t = s.token_ids.size(0), k = s.key_slots.size(0);
  const int64_t pad_queries = bucket.tokens - t, pad_keys = bucket.keys - k;
  // The padding state: pad_keys tokens at positions 0 .., the first pad_queries of them computed now. First, not last:
  // query i then sees the i + 1 keys before it, where as the state's last rows each would see nearly all pad_keys (a
  // warm question's bucket pads about as many keys as the state has: its padding cost a state's attention per layer).
  s.token_ids = padded(s.token_ids, pad_queries, 0);
  s.positions = at::cat({s.positions, run_from(0, pad_queries)});
  for (auto* ids : {&s.segments, &s.parents, &s.roots}) *ids = padded(*ids, pad_queries, kPadSegment);
  s.slots = padded(s.slots, pad_queries, scratch_slot);
  for (int64_t i = 0; i < pad_queries; ++i) s.key_end.push_back(k + i + 1);
  s.key_slots = padded(s.key_slots, pad_keys, scratch_slot);
  s.key_positions = at::cat({s.key_positions, run_from(0, pad_keys)});
  s.key_segments = padded(s.key_segments, pad_keys, kPadSegment);
  if (s.rope_positions.defined()) s.rope_positions = padded(s.rope_positions, pad_queries, 0);
  if (s.long_rope.defined()) s.long_rope = padded(s.long_rope, pad_queries, 0);
}

}  // namespace tq
