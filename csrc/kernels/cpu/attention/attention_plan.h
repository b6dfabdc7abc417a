// A step's attention for the CPU kernels (attention.h), planned once and shared by every layer:
// its queries cut into chunks, the keys each chunk reads, and the mask of those it cannot see
// (the one visibility rule, batch/visibility.h).
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "kernels/layer_kernels.h"

namespace tq {

// How a step's queries are cut into chunks, which keys each chunk reads, and
// its additive mask (0 or -inf). Built once per step and shared by every
// layer. Keys are ordered so that each query's own key comes after every key
// it sees, so a chunk reads keys [key_begin, key_end) only (skipping the masked
// upper triangle of a causal prefill, and keys left behind a sliding window);
// keys [key_begin, bias_begin) are visible to every query of the chunk and
// need no mask, which keeps the plan small for long states.
//
// A hole is a run of keys after bias_begin that no query of the chunk sees:
// in a chunk of questions, the keys of the questions before them in the step.
// Keys [hole_begin, hole_end) are not read, nor in the bias.
struct AttentionPlan {
  struct Chunk {
    int64_t begin, end;           // queries
    int64_t key_begin, key_end;   // keys read, but for the hole
    int64_t bias_begin;           // first key that some query of the chunk cannot see
    int64_t hole_begin, hole_end;  // keys skipped, in [bias_begin, key_end]; empty if equal
    at::Tensor bias;              // [end - begin, keys read from bias_begin] fp32
    int64_t keys() const { return key_end - key_begin - (hole_end - hole_begin); }
  };
  std::vector<Chunk> chunks;
  // Paired (key_pairs.h): keys are read in this order, gaps included, and
  // every chunk starts at a pair; the key indices above are places in it.
  at::Tensor key_order;  // or undefined: the step's keys as they are
};

// paired: for the invariant bf16 mix, which adds keys in pairs at every level. invariant: for
// the invariant kernels, which gather an item's keys around a hole (oneDNN reads them in
// place, as one run) and score its rows a few at a time (oneDNN all at once: its chunks
// are shorter over many keys).
AttentionPlan plan_attention(const QueryLayout& queries, const at::Tensor& k_pos, const at::Tensor& k_seg,
                             std::optional<int64_t> window, int64_t heads, bool paired = false, bool invariant = false);

}  // namespace tq
