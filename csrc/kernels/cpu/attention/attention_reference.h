// The CPU attention's math written plainly, to read beside the kernels (as llm.c keeps
// attention_forward beside its fast kernels) and to check them (test/native/cascade_check.cpp):
// for each query and head, the scaled scores against the keys the rule lets it see, soft-capped
// if asked, a softmax over them, and the values' sum weighted by it. Not used by the engine.
#pragma once
#include <ATen/ATen.h>

namespace tq {

// q: [Tq, heads, dim]; k, v: [Tk, kv_heads, dim], any float dtype; visible: [Tq, Tk] bool (the
// visibility rule's mask, batch/visibility.h; each query sees at least one key). Query head h
// reads KV head h / (heads / kv_heads). softcap > 0: each scaled score s becomes
// softcap * tanh(s / softcap). In doubles; returns [Tq, heads, dim] fp32.
at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible, double softcap = 0);

}  // namespace tq
