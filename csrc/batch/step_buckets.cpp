#include "batch/step_buckets.h"

#include <algorithm>
#include <numeric>

namespace tq {
namespace {

// t's rows followed by `n` rows (t int64 on the host, 1-D or [T, 3]), which `fill_rows` writes: one allocation and
// plain copies. A bucketed step is padded before every launch, a warm question's too, where at::cat, at::full and
// at::arange cost the host microseconds each (bench/README.md, "The host's planning of a call").
template <typename Fill>
at::Tensor padded_with(const at::Tensor& t, int64_t n, Fill fill_rows) {
  if (n == 0) return t;
  auto shape = t.sizes().vec();
  const int64_t row = t.dim() > 1 ? t.size(1) : 1;
  shape[0] += n;
  auto out = at::empty(shape, t.options());
  const auto from = t.contiguous();
  std::copy_n(from.data_ptr<int64_t>(), from.numel(), out.data_ptr<int64_t>());
  fill_rows(out.data_ptr<int64_t>() + from.numel(), n * row);
  return out;
}

// t's rows followed by `n` rows of `value`.
at::Tensor padded(const at::Tensor& t, int64_t n, int64_t value) {
  return padded_with(t, n, [value](int64_t* to, int64_t count) { std::fill_n(to, count, value); });
}

// t followed by 0, 1, ..., n - 1 (t 1-D).
at::Tensor counted_on(const at::Tensor& t, int64_t n) {
  return padded_with(t, n, [](int64_t* to, int64_t count) { std::iota(to, to + count, int64_t{0}); });
}

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
  s.positions = counted_on(s.positions, pad_queries);
  for (auto* ids : {&s.segments, &s.parents, &s.roots}) *ids = padded(*ids, pad_queries, kPadSegment);
  s.slots = padded(s.slots, pad_queries, scratch_slot);
  for (int64_t i = 0; i < pad_queries; ++i) s.key_end.push_back(k + i + 1);
  s.key_slots = padded(s.key_slots, pad_keys, scratch_slot);
  s.key_positions = counted_on(s.key_positions, pad_keys);
  s.key_segments = padded(s.key_segments, pad_keys, kPadSegment);
  if (s.rope_positions.defined()) s.rope_positions = padded(s.rope_positions, pad_queries, 0);
  if (s.long_rope.defined()) s.long_rope = padded(s.long_rope, pad_queries, 0);
}

}  // namespace tq
