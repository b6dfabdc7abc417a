// How a packed call is cut into forward steps. Each step computes at most
// max_step_tokens of the tokens not found in the prefix cache, in packing
// order, and attends through the KV cache to what earlier steps wrote: to the
// tokens of the segments its queries are in and of their ancestors, up to its
// last query. The plan is built before any layer runs and names, per step,
// which computed rows are read out and where they go in the call's output.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "batch/packed_tokens.h"

namespace tq {

// The tokens one forward step computes and the cached tokens they may attend to.
struct StepBatch {
  at::Tensor token_ids, positions, segments, parents, roots, slots;  // [T] int64, the new tokens
  std::vector<int64_t> key_end;                       // [T] 1 + index of each new token's own key
  at::Tensor key_slots, key_positions, key_segments;  // [Tk] int64, includes the new tokens
  std::vector<int64_t> output_rows;                   // indices into the new tokens, ascending
  // A multimodal call's (batch/packed_tokens.h): [T, 3] int64 M-RoPE positions (undefined:
  // `positions` drive RoPE), and the new tokens whose embeddings are image rows ([I] int64) with those rows ([I, hidden] fp32).
  at::Tensor rope_positions{}, image_rows{}, image_embeds{};
  // [T] int64, 1 for the tokens of sequences that take longrope's long factors; undefined when none does.
  at::Tensor long_rope{};
};

struct Step {
  StepBatch batch;
  std::vector<int64_t> output_index;  // per output row: its row in the call's output
  int64_t state_queries = 0;          // queries in state segments (for the state/questions time split)
};

// slots: the KV slot of every packed token; compute: the packed indices to
// compute, ascending (cached state prefixes left out). Output rows are
// packed.output_rows, in that order.
// image_embeds: a multimodal call's (packed.image_embeds()), undefined when no image token is computed.
std::vector<Step> plan_steps(const PackedTokens& packed, const std::vector<int64_t>& slots, const std::vector<int64_t>& compute,
                             int64_t max_step_tokens, const at::Tensor& image_embeds = {});

// Each of a step's keys' step row: the new token whose own key it is, -1 for a key the cache holds already
// (QueryLayout::key_rows).
std::vector<int32_t> key_rows_of(const StepBatch& step);

}  // namespace tq
