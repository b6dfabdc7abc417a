// A TorchScript export run as one packed forward (no KV cache). Contract
// (see docs/engine.md, "TorchScript models"):
//   forward(input_ids: int64[T], position_ids: int64[T], attention_mask: bool[T, T]) -> float[T, hidden]
//     returns final-normed hidden states; attention_mask[i][j] is true where token i may attend to token j.
//   lm_head_weight() -> float[vocab, hidden]   (an @torch.jit.export method)
#pragma once
#include <memory>

#include "model/hidden_state_model.h"

namespace torch::jit {
struct Module;
}

namespace tq {

class ScriptedModel : public HiddenStateModel {
 public:
  ScriptedModel(const std::string& path, at::ScalarType dtype);
  ~ScriptedModel() override;
  ForwardResult final_hidden(const PackedTokens& packed) override;
  const at::Tensor& lm_head() const override { return lm_head_; }
  int64_t vocab_size() const override { return lm_head_.size(0); }
  int64_t hidden_size() const override { return lm_head_.size(1); }
  std::string describe() const override { return "TorchScript"; }

 private:
  std::unique_ptr<torch::jit::Module> module_;
  at::Tensor lm_head_;
};

}  // namespace tq
