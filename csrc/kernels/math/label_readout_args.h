// The arguments of the readout kernel (kernels/cuda/label_readout.h launches it; its body, label_readout.cuh, runs on
// the host in the CPU checks too). Plain pointers, no CUDA or torch types.
#pragma once
#include <cstdint>

namespace tq::cuda {

struct LabelReadoutArgs {
  const float* hidden;        // [questions, hidden_size] fp32, final-normed
  const void* lm_head;        // [vocab, hidden_size], bf16 (lm_head_bf16) or fp32
  bool lm_head_bf16;
  int64_t hidden_size;
  int questions;
  const int64_t* label_ids;   // all questions' labels, concatenated
  const int32_t* offsets;     // [questions + 1]: question q's labels are [offsets[q], offsets[q + 1])
  const float* temperatures;  // [questions]
  float softcap;              // the model's final logit soft-cap (0: none)
  float* logits;              // [offsets[questions]]
  float* log_probs;           // [offsets[questions]]
};

}  // namespace tq::cuda
