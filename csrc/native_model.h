// An HF checkpoint run by our transformer over the paged KV cache. A request
// is computed in steps of at most max_step_tokens over [state, q1, q2, ...]:
// each step attends to the earlier ones through the cache, and each question
// to the state's blocks and its own.
#pragma once
#include <map>
#include <memory>

#include "checkpoint.h"
#include "hidden_state_model.h"
#include "kv_cache.h"
#include "transformer.h"

namespace tq {

enum class BoundaryRegistration { After, Before };

struct NativeModelOptions {
  at::ScalarType dtype = at::kFloat;
  int64_t block_size = 16;
  int64_t cache_tokens = 0;  // KV capacity; 0 = twice the context limit
  int64_t cache_mib = 0;     // KV budget in MiB; overrides cache_tokens when set
  int64_t max_step_tokens = 2048;
  int64_t context_limit = 32768;
  bool prefix_cache = true;
  bool batch_invariant = true;  // transformer.h
  // When the state's partial last block enters the prefix cache: in the same
  // call (Before), or when register_boundary(ticket) is called, which the
  // server does after sending the response (After).
  BoundaryRegistration boundary = BoundaryRegistration::After;
};

class NativeModel : public HiddenStateModel {
 public:
  NativeModel(const std::string& dir, const NativeModelOptions& options);
  at::Tensor final_hidden(const PackedTokens& packed, ForwardInfo& times) override;
  const at::Tensor& lm_head() const override { return transformer_->lm_head(); }
  int64_t vocab_size() const override { return checkpoint_->config().vocab_size; }
  int64_t hidden_size() const override { return checkpoint_->config().hidden_size; }
  std::string describe() const override { return checkpoint_->config().architecture_name; }
  bool register_boundary(int64_t ticket) override;
  const KvCache& cache() const { return *cache_; }
  const NativeModelOptions& options() const { return options_; }
  std::string stored_dtype() const { return checkpoint_->stored_dtype(); }
  int64_t pending_boundaries() const { return static_cast<int64_t>(pending_.size()); }

 private:
  struct PendingBoundary {
    std::vector<int32_t> blocks;  // retained until registered or dropped
    std::vector<int64_t> tokens;
  };
  // Frees the blocks held by pending boundaries (they are dropped) so that a request fits.
  int64_t drop_pending_boundaries();
  std::map<int64_t, PendingBoundary> pending_;
  int64_t next_ticket_ = 0;

  NativeModelOptions options_;
  std::unique_ptr<Checkpoint> checkpoint_;  // owns the memory maps the weights view
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<KvCache> cache_;
};

}  // namespace tq
