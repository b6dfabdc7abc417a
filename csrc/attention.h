// Masked multi-head attention of new queries over gathered keys, with GQA and
// the one visibility rule of the engine: a query at (position p, segment s)
// sees a key at (position p', segment s') when p' <= p, s' is the shared root
// (0) or s itself, and p - p' is inside the sliding window if there is one.
#pragma once
#include <ATen/ATen.h>

#include <optional>

namespace tq {

// [Tq, Tk] bool: true where query i may attend to key j.
at::Tensor visibility_mask(const at::Tensor& q_pos, const at::Tensor& q_seg, const at::Tensor& k_pos,
                           const at::Tensor& k_seg, std::optional<int64_t> window);

struct AttentionInputs {
  at::Tensor q;  // [Tq, heads, head_dim], compute dtype
  at::Tensor k;  // [Tk, kv_heads, head_dim]
  at::Tensor v;  // [Tk, kv_heads, head_dim]
  at::Tensor q_pos, q_seg, k_pos, k_seg;  // int64
  std::optional<int64_t> window;
};

// Returns [Tq, heads, head_dim] in the dtype of q. Softmax runs in fp32;
// queries are processed in chunks so the score matrix stays bounded.
at::Tensor attention(const AttentionInputs& in);

}  // namespace tq
