// Fixed-shape steps, for CUDA graphs (docs/gpu.md, "CUDA graphs"). A graph
// replays the launches it captured, with their shapes and host scalars baked
// in, so a step can replay one only if its shapes are the captured ones. Steps
// up to a cold state's prefill (a warm question, questions about a cached
// state, a state of a few thousand tokens: where launching a step's hundreds
// of kernels one by one costs as much as their work) are therefore padded up
// to a bucket of new tokens and keys.
//
// The padding is inert: its tokens form a state of their own (segment
// kPadSegment, token id 0) whose keys all live in the KV cache's scratch slot,
// which no block of the pool uses. Its queries are its first tokens (each sees
// the few keys before it, not the padding's hundreds), they see only its keys, no real
// query sees them, and no output row is a padding row; every kernel computes a
// row independently of the others (the batch-invariant CPU kernels; on the GPU
// the cascade and the row kernels), so the real rows' bits do not change
// (test/engine/buckets.test.ts). On the CPU the padded step runs eagerly: the
// same step, checked there.
#pragma once
#include <cstdint>
#include <optional>

#include "batch/step_plan.h"

namespace tq {

// The segment id of padding tokens: above any segment a call packs.
constexpr int64_t kPadSegment = int64_t{1} << 40;

struct StepBucket {
  int64_t tokens = 0, keys = 0;
};

// The least floor * 2^i at or above n: a bucket's size.
int64_t power_of_two_at_least(int64_t n, int64_t floor);

// A step's new tokens padded to: a power of two from 8 up to 256; above that, the next quarter of
// an octave (320, 384, 448, 512, 640, ...), so that a prefill's padding is at most a quarter of its
// work where that work is large.
int64_t bucket_tokens(int64_t n);

// The bucket of a step of `tokens` new tokens over `keys` keys: tokens as bucket_tokens says, up to
// kMaxBucketTokens (twice the default step), keys to a power of two from 64 leaving room for the
// padding's own keys; none for a larger step (it runs as it is: launch time is small beside its work).
constexpr int64_t kMaxBucketTokens = 4096, kMaxBucketKeys = 16384;
std::optional<StepBucket> bucket_for(int64_t tokens, int64_t keys);

// Pads the step to the bucket (bucket_for's), writing padding to `scratch_slot`.
void pad_step(StepBatch& step, const StepBucket& bucket, int64_t scratch_slot);

}  // namespace tq
