// Single-position readout: the logits of each question's option labels, and
// their log-probabilities at the question's temperature, computed from only
// those rows of the lm_head (never the full vocabulary projection), for a
// whole batch at once. The arithmetic is kernels/math/label_readout_math.h: here on
// the CPU (the tested definition), and on CUDA by the kernel of
// kernels/cuda/label_readout.cu in one launch.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "runner/device.h"

namespace tq {

struct ReadoutQuestion {
  std::vector<int64_t> label_ids;
  float temperature = 1.0f;
};

struct LabelReadout {
  std::vector<float> logits, log_probs;  // all questions' labels, concatenated in order
  std::vector<int64_t> offsets;          // [questions + 1]
};

// A readout queued: on CUDA its kernel launched and its results' copy back queued behind it, both done once `copied`
// is reached (wait() waits for that, not for work queued after it); on the CPU, computed already.
struct QueuedReadout {
  LabelReadout labels;  // the CPU's result, and the offsets everywhere
  at::Tensor host_values;  // CUDA's, in pinned memory: [2, labels] fp32, the logits then the log-probabilities (one copy back)
  std::unique_ptr<DeviceMark> copied;
  LabelReadout wait();
};

// hidden: [questions, hidden] fp32, final-normed, on the lm_head's device; lm_head: [vocab, hidden] fp32 or bf16.
// softcap: the model's final logit soft-cap (0: none), applied to each label's logit.
QueuedReadout queue_readout(const at::Tensor& hidden, const at::Tensor& lm_head, const std::vector<ReadoutQuestion>& questions, float softcap = 0);
inline LabelReadout read_labels(const at::Tensor& hidden, const at::Tensor& lm_head, const std::vector<ReadoutQuestion>& questions, float softcap = 0) {
  return queue_readout(hidden, lm_head, questions, softcap).wait();
}

// Full-vocabulary projection, for reference checks and the readout benchmark.
at::Tensor full_logits(const at::Tensor& hidden, const at::Tensor& lm_head, float softcap = 0);

}  // namespace tq
