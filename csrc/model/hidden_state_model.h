// What the engine needs from a model: final hidden states at chosen rows of a
// packed request, and the lm_head whose label rows the readout gathers.
#pragma once
#include <ATen/ATen.h>

#include <string>

#include "batch/packed_tokens.h"

namespace tq {

class HiddenStateModel {
 public:
  virtual ~HiddenStateModel() = default;
  // The final-normed hidden states of the packed call's output rows (the lm_head's input), and its report.
  virtual ForwardResult final_hidden(const PackedTokens& packed) = 0;
  virtual const at::Tensor& lm_head() const = 0;
  // The soft-cap of the output logits, cap * tanh(logit / cap) (Gemma's final_logit_softcapping); 0: none.
  virtual float final_logit_softcap() const { return 0; }
  // longrope's original context: longer sequences take its long factors (packed_tokens.h); 0: no longrope.
  virtual int64_t long_rope_after() const { return 0; }
  virtual int64_t vocab_size() const = 0;
  virtual int64_t hidden_size() const = 0;
  virtual std::string describe() const = 0;  // architecture, for info()
  // Registers a state boundary left pending by final_hidden; false when it was dropped.
  virtual bool register_boundary(int64_t /*ticket*/) { return false; }
};

}  // namespace tq
