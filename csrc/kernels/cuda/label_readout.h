// The readout on the GPU, in one launch for a whole batch of questions (one
// block per question). Torch-free (raw pointers and a stream) so that nvcc
// compiles it alone: CI builds it for sm_90 without a GPU or a CUDA libtorch.
// The arithmetic is kernels/math/label_readout_math.h, shared with the CPU readout.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

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

cudaError_t launch_label_readout(const LabelReadoutArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
