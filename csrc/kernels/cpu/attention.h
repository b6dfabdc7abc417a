// Masked multi-head attention of new queries over gathered keys, with GQA and
// the one visibility rule of the engine: a query at (position p, segment s,
// whose parent is segment a and state is segment r) sees a key at (position
// p', segment s') when p' <= p, s' is s, a or r, and p - p' is inside the
// sliding window if any (packed_tokens.h).
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "kernels/cpu/isa.h"
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

// paired: for the vdpbf16ps mix (invariant bf16 at avx512-bf16). holes: for
// the invariant kernels, which gather an item's keys (oneDNN reads them in
// place, as one run).
AttentionPlan plan_attention(const QueryLayout& queries, const at::Tensor& k_pos, const at::Tensor& k_seg,
                             std::optional<int64_t> window, int64_t heads, bool paired = false, bool holes = false);

// q: [Tq, heads, dim]; k, v: [Tk, kv_heads, dim]. Returns [Tq, heads, dim] in
// q's dtype; scores and softmax are fp32. invariant: on the invariant GEMM at
// level isa (a query's result independent of the chunk it is in), else on
// oneDNN. isa also picks the softmax's vectors. A paired plan needs invariant
// bf16 at avx512-bf16. softcap > 0: the scaled scores are soft-capped, cap * tanh(s / cap), before the mask and softmax.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan, bool invariant, Isa isa,
                     double softcap = 0);

// Bytes the worker threads hold in attention buffers; between steps at most
// attention_buffer_kept_bytes() each (8 MiB).
int64_t attention_buffer_bytes();
int64_t attention_buffer_kept_bytes();
// Returns each worker thread's buffers over that bound: at the end of a step.
void trim_attention_buffers();

}  // namespace tq
