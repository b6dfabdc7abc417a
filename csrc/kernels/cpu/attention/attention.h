// Masked multi-head attention of new queries over gathered keys, with GQA and
// the one visibility rule of the engine: a query at (position p, segment s,
// whose parent is segment a and state is segment r) sees a key at (position
// p', segment s') when p' <= p, s' is s, a or r, and p - p' is inside the
// sliding window if any (packed_tokens.h).
//
// The plan: attention_plan.*. The work of one chunk and KV head: on oneDNN
// (attention_onednn.cpp) or on the invariant GEMM (attention_invariant.cpp),
// over attention_item.h; each thread's buffers: attention_buffers.cpp. The
// same math written plainly, for reading and for the checks:
// attention_reference.h.
#pragma once
#include <ATen/ATen.h>

#include "kernels/cpu/attention/attention_plan.h"
#include "kernels/cpu/isa.h"

namespace tq {

// q: [Tq, heads, dim]; k, v: [rows, kv_heads, dim], key i at row key_rows[i] ([Tk] int64: a KV cache's slots), or at
// row i where key_rows is undefined. Returns [Tq, heads, dim] in q's dtype; scores and softmax are fp32. invariant: on
// the invariant GEMM at level isa (a query's result independent of the chunk it is in), else on oneDNN. isa also picks
// the softmax's vectors. The invariant bf16 kernels take a paired plan, and only they do. softcap > 0: the scaled
// scores are soft-capped, cap * tanh(s / cap), before the mask and softmax.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan, bool invariant, Isa isa,
                     double softcap = 0, const at::Tensor& key_rows = {});

// Bytes the worker threads hold in attention buffers; between steps at most
// attention_buffer_kept_bytes() each (8 MiB).
int64_t attention_buffer_bytes();
int64_t attention_buffer_kept_bytes();
// Returns each worker thread's buffers over that bound: at the end of a step.
void trim_attention_buffers();

}  // namespace tq
