// An HF checkpoint run by our transformer over the paged KV cache: the
// engine-side owner of a call. It gives each segment of a packed call its block
// table (starting with what the prefix cache holds), has the call cut into
// steps (batch/step_plan.h), runs each step through the transformer (which
// only computes), and enters the states into the prefix cache.
#pragma once
#include <memory>

#include "batch/step_plan.h"
#include "cache/kv_cache.h"
#include "cache/pending_boundaries.h"
#include "runner/boundary_registration.h"
#include "runner/step_graphs.h"
#include "kernels/kernel_stack.h"
#include "model/checkpoint.h"
#include "model/hidden_state_model.h"
#include "model/transformer.h"
#include "vision/vision_tower.h"

namespace tq {

struct PagedModelOptions {
  // The layer kernels (kernels/kernel_stack.h): where the weights, the KV cache and the forward pass live,
  // the dtype, whose ops run it, the CPU kernels' level (updated when it is measured), the weights'
  // quantization, the attention form, and whether steps are padded to fixed shapes
  // (batch/step_buckets.h: with the cascade, run through CUDA graphs, runner/step_graphs.h).
  KernelStackOptions kernels;
  int64_t block_size = 16;
  int64_t cache_tokens = 0;  // KV capacity; 0 = twice the context limit
  int64_t cache_mib = 0;     // KV budget in MiB; overrides cache_tokens when set
  int64_t max_step_tokens = 2048;
  int64_t context_limit = 32768;
  int64_t graph_chunks = 1;  // the CUDA graphs a fixed-shape step is cut into, at most (runner/step_graphs.h)
  bool prefix_cache = true;
  BoundaryRegistration boundary = BoundaryRegistration::After;
  // On CUDA with neither cache_tokens nor cache_mib set: the KV cache takes this share of the device
  // memory left free once the weights are loaded (vLLM's --gpu-memory-utilization; 0: twice the context limit).
  double gpu_memory_utilization = 0;
  bool measure_level = false;  // the CPU kernels at the fastest level for this model's GEMMs, up to kernels.isa (kernels/cpu/level_choice.h)
};

class PagedModel : public HiddenStateModel {
 public:
  PagedModel(const std::string& dir, const PagedModelOptions& options);
  ForwardResult final_hidden(const PackedTokens& packed) override;
  const at::Tensor& lm_head() const override { return transformer_->lm_head(); }
  int64_t vocab_size() const override { return checkpoint_->config().vocab_size; }
  float final_logit_softcap() const override { return static_cast<float>(checkpoint_->config().final_logit_softcap); }
  int64_t long_rope_after() const override {
    const auto& rope = checkpoint_->config().rope;
    return rope.scaling == RopeConfig::Scaling::LongRope ? rope.original_max_position_embeddings : 0;
  }
  int64_t hidden_size() const override { return checkpoint_->config().hidden_size; }
  std::string describe() const override { return checkpoint_->config().architecture_name; }
  bool register_boundary(int64_t ticket) override;
  const KvCache& cache() const { return *cache_; }
  const LayerKernels& kernels() const { return transformer_->kernels(); }
  // Recording copies tensors to the host mid-forward: traced steps run without graphs.
  void trace_into(ForwardTrace* trace) {
    transformer_->trace_into(trace);
    tracing_ = trace != nullptr;
  }
  const PagedModelOptions& options() const { return options_; }
  // How the CPU kernels' level was chosen (kernels/cpu/level_choice.h): forced unless measure_level;
  // how "" off the invariant CPU kernels.
  const LevelChoice& level_choice() const { return level_choice_; }
  // Measures the levels again (a choice that was measured or cached) and, where a trusted measurement
  // finds another level fastest, rebuilds the layers at it: the answers stay the same bits. Returns
  // whether the level changed (the vision tower is then a new one). On the engine thread, between calls.
  bool remeasure_level();
  // What sized the KV cache: "mib", "tokens", "gpu-memory" or "context" (twice the context limit).
  const std::string& cache_sized_by() const { return cache_sized_by_; }
  std::string stored_dtype() const { return checkpoint_->stored_dtype(); }
  double weights_ms() const { return weights_ms_; }
  int64_t linear_bytes() const { return transformer_->linear_bytes(); }
  int64_t pending_boundaries() const { return pending_->size(); }
  const ModelConfig& config() const { return checkpoint_->config(); }
  // The checkpoint's vision tower (a vision-language model), or null.
  const VisionTower* vision() const { return vision_.get(); }

 private:
  // The KV cache's size in blocks, by the options' rule; sets cache_sized_by_.
  int64_t kv_blocks(int64_t bytes_per_block);

  // Block tables of every segment; cached prefixes of states when caching.
  std::vector<std::unique_ptr<Sequence>> allocate(const PackedTokens& packed, const std::vector<int64_t>& offsets, bool caching);
  // final_hidden's phases: each packed token's KV slot and the tokens to compute (cached state prefixes left out);
  // the steps queued, their output rows gathered (the time split between state and questions read once they are
  // done: ForwardResult::wait_for_steps); and each state's blocks registered in the prefix cache, its boundary
  // held for the server where it registers after.
  struct Slots {
    std::vector<int64_t> slots, compute;
  };
  Slots slots_to_compute(const PackedTokens& packed, const std::vector<int64_t>& offsets,
                         const std::vector<std::unique_ptr<Sequence>>& seqs) const;
  void run_steps(const PackedTokens& packed, const Slots& slots, ForwardResult& result);
  void register_states(const PackedTokens& packed, const std::vector<int64_t>& offsets, const std::vector<std::unique_ptr<Sequence>>& seqs,
                       bool caching, ForwardInfo& info);
  // Sets options_.isa to the fastest level where measure_level asks for it, and level_choice_.
  void choose_level();
  std::vector<GemmShape> gemm_shapes() const;
  // The kernels, the transformer's weights in their layout, and the vision tower, at options_.isa.
  void build_layers();
  // A step's final hidden states of its output rows: through a CUDA graph where it has one.
  at::Tensor step_forward(const StepBatch& step, ForwardInfo& info);

  PagedModelOptions options_;
  std::unique_ptr<Checkpoint> checkpoint_;  // owns the memory maps the weights view
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<VisionTower> vision_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<PendingBoundaries> pending_;  // holds blocks of cache_: destroyed first
  std::unique_ptr<StepGraphs> graphs_;          // with fixed shapes (options_.kernels.fixed_shapes)
  bool tracing_ = false;
  LevelChoice level_choice_;
  double weights_ms_ = 0;
  std::string cache_sized_by_;
};

}  // namespace tq
