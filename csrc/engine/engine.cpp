#include "engine/engine.h"

#include <ATen/Parallel.h>
#include <sys/stat.h>


#include "common/errors.h"
#include "engine/engine_options.h"
#include "engine/host_allocator.h"
#include "engine/intra_op_threads.h"
#include "runner/paged_model.h"
#include "engine/readout.h"
#include "engine/request_checks.h"
#include "kernels/kernel_stack.h"
#include "model/scripted_model.h"

// ATen's parallel_for compiles to a serial loop where OpenMP is off: the
// engine's own kernels (attention, softmax, SwiGLU, RMSNorm, RoPE) would run on
// one thread, silently.
// (A CUDA build leaves OpenMP to its libtorch: its CPU kernels run for parity checks only.)
#if !defined(_OPENMP) && !TQ_CUDA
#error "build the engine with -fopenmp (CMakeLists.txt and binding.gyp do)"
#endif

namespace tq {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw EngineError(code::kCheckpointInvalid, path + ": no such file or folder");
  return S_ISDIR(st.st_mode);
}

}  // namespace

Engine::Engine(const EngineOptions& options) : options_(options) {
  keep_freed_host_memory();
  if (options.threads > 0) set_intra_op_threads(options.threads);
  check_engine_options(options);
  info_.context_limit = options.context_limit;
  device_ = parse_device(options.device);
  use_device(device_);  // this thread runs the engine's every call (the addon's engine thread; tq_cli's one)
  options_ = resolve_forward_defaults(options, device_);
  const bool aten = uses_aten_kernels(options_, device_);
  if (is_directory(options.path)) open_checkpoint(aten);
  else open_torchscript(aten);
  info_.architecture = model_->describe();
  info_.vocab_size = model_->vocab_size();
  info_.hidden_size = model_->hidden_size();
  info_.threads = at::get_num_threads();
  info_.device = describe_device(device_);
}

void Engine::open_checkpoint(bool aten) {
  const auto o = paged_options(options_, computed_dtype(options_, aten, info_.dtype_note), device_, aten);
  auto paged = std::make_unique<PagedModel>(options_.path, o);
  info_.dtype = choice_name(o.kernels.dtype);
  describe_checkpoint(*paged, o);
  if ((vision_ = paged->vision())) vision_cache_ = std::make_unique<VisionCache>(options_.vision_cache_mib << 20);
  paged_ = paged.get();
  model_ = std::move(paged);
}

void Engine::remeasure_level() {
  if (!paged_) return;
  if (paged_->remeasure_level()) vision_ = paged_->vision();
  describe_level(*paged_);
}

void Engine::open_torchscript(bool aten) {
  check_torchscript_options(options_, device_, aten);
  model_ = std::make_unique<ScriptedModel>(options_.path, options_.dtype);
  info_.dtype = choice_name(options_.dtype);
  info_.format = "torchscript";
  info_.kernels = "libtorch";
  info_.stored_dtype = info_.dtype;
}

RequestLimits Engine::request_limits() const {
  return {model_->vocab_size(), options_.context_limit, vision_ ? info_.image_tokens.image_pad : -1};
}

MemoryStats Engine::memory_stats() const {
  MemoryStats m;
  const auto kernels = cpu_kernel_memory();
  m.attention_buffer_bytes = kernels.attention_buffer_bytes;
  m.attention_buffer_kept_bytes = kernels.attention_buffer_kept_bytes;
  m.cached_primitives = kernels.cached_primitives;
  m.cached_primitives_max = kernels.cached_primitives_max;
  if (paged_) m.pending_boundaries = paged_->pending_boundaries();
  return m;
}

CacheStats Engine::cache_stats() const {
  return paged_ ? paged_->cache().pool().stats() : CacheStats{};
}

const FewRowsGemm* Engine::few_rows_gemm() const { return paged_ ? paged_->kernels().few_rows_gemm() : nullptr; }

at::Tensor Engine::logits_all(const std::vector<int64_t>& state, const std::vector<ImageInput>& images) {
  if (!images.empty()) require_vision("logitsAll");
  const auto prompt = images.empty() ? ImagePrompt{} : image_prompt(state, images);
  const auto& tokens = images.empty() ? state : prompt.ids;
  check_whole_sequence(tokens, request_limits());
  PackedTokens packed;
  if (images.empty()) {
    const int64_t long_after = model_->long_rope_after();
    packed.add_segment(tokens, -1, long_after > 0 && static_cast<int64_t>(tokens.size()) > long_after);
  } else {
    packed.multimodal = true;
    packed.image_embeds = [&] { return image_embeddings(images); };
    packed.add_image_state(prompt, 0);
  }
  packed.use_prefix_cache = false;
  for (size_t i = 0; i < tokens.size(); ++i) packed.output_rows.push_back(static_cast<int64_t>(i));
  return full_logits(model_->final_hidden(packed).hidden, model_->lm_head(), model_->final_logit_softcap()).cpu().contiguous();
}

void Engine::trace_forward(ForwardTrace* trace) {
  if (!paged_) throw EngineError(code::kBadRequest, "a forward trace needs an HF checkpoint (TorchScript models run whole)");
  paged_->trace_into(trace);
}

}  // namespace tq
