// Single-position readout: the logits of a question's option labels, computed
// from only those rows of the lm_head (never the full vocabulary projection).
// This is the one place the readout math lives; a CUDA kernel replaces
// `label_logits_cpu` on GPU builds behind `label_logits`.
#pragma once
#include <ATen/ATen.h>

namespace tq {

// hidden: [hidden] fp32 final-normed state; lm_head: [vocab, hidden];
// label_ids: [n] int64. Returns [n] fp32 logits.
at::Tensor label_logits(const at::Tensor& hidden, const at::Tensor& lm_head, const at::Tensor& label_ids);
at::Tensor label_logits_cpu(const at::Tensor& hidden, const at::Tensor& lm_head, const at::Tensor& label_ids);

// Full-vocabulary projection, for reference checks and the readout benchmark.
at::Tensor full_logits(const at::Tensor& hidden, const at::Tensor& lm_head);

}  // namespace tq
