// What the engine says of itself (EngineInfo: /health, the start-up line, tq_cli info): the paged model's
// checkpoint, cache and kernels, and the CPU kernels' level as last measured.
#include "engine/engine.h"

#include "runner/paged_model.h"
#include "model/moe.h"

namespace tq {

void Engine::describe_checkpoint(const PagedModel& paged, const PagedModelOptions& o) {
  info_.quantization = quantization_name(o.kernels.quantization);
  info_.arithmetic = choice_name(o.kernels.native_arithmetic ? Arithmetic::Native : Arithmetic::Portable);
  describe_level(paged);
  info_.prefix_cache = options_.prefix_cache;
  info_.register_boundary = choice_name(options_.register_boundary);
  info_.format = "hf";
  info_.attention = choice_name(o.kernels.cascade_attention ? AttentionForm::Cascade : AttentionForm::Direct);
  if (o.kernels.cascade_attention) info_.state_attention = choice_name(o.kernels.state_attention);
  info_.cuda_graphs = options_.cuda_graphs.value_or(false);
  info_.cuda_graph_chunks = options_.cuda_graph_chunks;
  // Only the engine's own CPU kernels promise it; cuBLAS and SDPA choose their reductions by shape.
  info_.batch_invariant = options_.batch_invariant && !o.kernels.aten;
  info_.own_gemm = o.kernels.own_gemm;
  info_.stored_dtype = paged.stored_dtype();
  info_.block_size = paged.cache().shape().block_size;
  info_.cache_blocks = paged.cache().shape().num_blocks;
  info_.cache_bytes = paged.cache().bytes();
  info_.cache_sized_by = paged.cache_sized_by();
  info_.gpu_memory_utilization = options_.gpu_memory_utilization;
  info_.moe = paged.config().moe;
  const auto counts = parameter_counts(paged.config());
  info_.parameters = counts.total;
  info_.active_parameters = counts.active;
  if (paged.vision()) {
    info_.vision = paged.vision()->config();
    info_.image_tokens = paged.config().image_tokens;
  }
}

void Engine::describe_level(const PagedModel& paged) {
  const auto quantization = paged.options().kernels.quantization;
  if (quantization == Quantization::Int8) info_.quantized_kernels = int8_kernel_name(paged.options().kernels.isa);  // the level chosen
  if (quantization == Quantization::Fp8) info_.quantized_kernels = kFp8KernelName;
  info_.weights_ms = paged.weights_ms();
  info_.linear_bytes = paged.linear_bytes();
  info_.kernels = paged.kernels().name();
  const auto& choice = paged.level_choice();
  info_.level_choice = choice.how;
  info_.level_busy = choice.busy;
  info_.level_rounds = choice.rounds;
  info_.level_rates.clear();
  for (const auto& r : choice.rates) info_.level_rates.emplace_back(isa_name(r.level), r.gflops);
}

}  // namespace tq
