// An HF checkpoint run by our transformer over the paged KV cache. A request
// is computed in steps of at most max_step_tokens over [state, q1, q2, ...]:
// each step attends to the earlier ones through the cache, and each question
// to the state's blocks and its own.
#pragma once
#include <memory>

#include "checkpoint.h"
#include "hidden_state_model.h"
#include "kv_cache.h"
#include "transformer.h"

namespace tq {

struct NativeModelOptions {
  at::ScalarType dtype = at::kFloat;
  int64_t block_size = 16;
  int64_t cache_tokens = 0;  // KV capacity; 0 = twice the context limit
  int64_t max_step_tokens = 2048;
  int64_t context_limit = 32768;
};

class NativeModel : public HiddenStateModel {
 public:
  NativeModel(const std::string& dir, const NativeModelOptions& options);
  at::Tensor final_hidden(const PackedTokens& packed, ForwardTimes& times) override;
  const at::Tensor& lm_head() const override { return transformer_->lm_head(); }
  int64_t vocab_size() const override { return checkpoint_->config().vocab_size; }
  int64_t hidden_size() const override { return checkpoint_->config().hidden_size; }
  std::string describe() const override { return checkpoint_->config().architecture_name; }
  const KvCache& cache() const { return *cache_; }
  std::string stored_dtype() const { return checkpoint_->stored_dtype(); }

 private:
  NativeModelOptions options_;
  std::unique_ptr<Checkpoint> checkpoint_;  // owns the memory maps the weights view
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<KvCache> cache_;
};

}  // namespace tq
