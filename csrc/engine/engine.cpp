#include "engine/engine.h"

#include <ATen/Parallel.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "batch/pack_requests.h"
#include "common/errors.h"
#include "engine/engine_options.h"
#include "engine/host_allocator.h"
#include "runner/paged_model.h"
#include "engine/readout.h"
#include "engine/request_checks.h"
#include "kernels/kernel_stack.h"
#include "kernels/math/label_readout_math.h"
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
  if (options.threads > 0) at::set_num_threads(options.threads);
  check_engine_options(options);
  info_.context_limit = options.context_limit;
  device_ = parse_device(options.device);
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

std::vector<AnswerResult> Engine::answer_batch(const std::vector<AnswerRequest>& reqs) {
  if (reqs.empty()) throw EngineError(code::kBadRequest, "a batch needs at least one request");
  // A call with images is multimodal throughout (batch/packed_tokens.h): its states are expanded around their images.
  const bool multimodal = std::any_of(reqs.begin(), reqs.end(), [](const AnswerRequest& r) { return !r.images.empty(); });
  if (multimodal) require_vision("the request");
  const auto prompts = checked_prompts(reqs, multimodal);
  auto batch = pack(reqs, prompts, multimodal);
  const auto forward = model_->final_hidden(batch.tokens);  // on CUDA, finished: the paged model waits after each step
  const auto& info = forward.info;
  const auto& hidden = forward.hidden;
  const auto t0 = std::chrono::steady_clock::now();
  // Every question's labels in one readout (on CUDA, one launch), in output-row order.
  std::vector<ReadoutQuestion> readout;
  for (const auto& req : reqs)
    for (const auto& q : req.questions) readout.push_back({q.label_ids, q.temperature});
  const auto labels = read_labels(hidden, model_->lm_head(), readout, model_->final_logit_softcap());
  auto results = answers_of(reqs, prompts, multimodal, batch, info, labels, hidden);
  const double readout_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  release_free_host_memory();
  for (auto& res : results) {
    res.state_ms = info.state_ms;
    res.questions_ms = info.questions_ms;
    res.readout_ms = readout_ms;
    res.computed_tokens = info.computed_tokens;
    res.padding_tokens = info.padding_tokens;
    res.graph_replays = info.graph_replays;
  }
  return results;
}

// Each request checked (an error names the request when there are several); in a multimodal
// call, its state expanded around its images first, since the expanded state is what must fit.
std::vector<ImagePrompt> Engine::checked_prompts(const std::vector<AnswerRequest>& reqs, bool multimodal) const {
  std::vector<ImagePrompt> prompts(reqs.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    const std::string where = reqs.size() > 1 ? "request " + std::to_string(r) + ": " : "";
    if (multimodal) {
      try {
        prompts[r] = image_prompt(reqs[r].state, reqs[r].images);
      } catch (const EngineError& e) {
        throw EngineError(e.code(), where + e.what(), e.details());
      }
    }
    check_request(reqs[r], static_cast<int64_t>(multimodal ? prompts[r].ids.size() : reqs[r].state.size()), request_limits(), where);
  }
  return prompts;
}

// The requests as one segment forest (batch/pack_requests.h): each state once, then its questions.
PackedRequests Engine::pack(const std::vector<AnswerRequest>& reqs, const std::vector<ImagePrompt>& prompts, bool multimodal) {
  std::vector<RequestToPack> to_pack(reqs.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    to_pack[r].state = &reqs[r].state;
    to_pack[r].image_state = &prompts[r];
    to_pack[r].salt = reqs[r].cache_salt;
    for (const auto& q : reqs[r].questions) {
      to_pack[r].questions.push_back(&q.tokens);
      to_pack[r].readout_at.push_back(q.readout_at());
    }
  }
  auto batch = pack_requests(to_pack, multimodal, model_->long_rope_after());
  // Every state's images, in packing order: made during the forward pass, only if some image token is computed.
  batch.tokens.image_embeds = [this, &reqs, first = batch.first_with_state] {
    std::vector<at::Tensor> embeds;
    for (auto r : first)
      if (!reqs[r].images.empty()) embeds.push_back(image_embeddings(reqs[r].images));
    return at::cat(embeds);
  };
  return batch;
}

// Each request's result: its questions' labels (and hidden states, if asked) in output-row order,
// its prefix cache counts, and its state's boundary ticket (given to the first request of that state).
std::vector<AnswerResult> Engine::answers_of(const std::vector<AnswerRequest>& reqs, const std::vector<ImagePrompt>& prompts, bool multimodal,
                                             const PackedRequests& batch, const ForwardInfo& info, const LabelReadout& labels,
                                             const at::Tensor& hidden) const {
  const bool any_hidden = std::any_of(reqs.begin(), reqs.end(), [](const AnswerRequest& r) { return r.want_hidden; });
  const auto hidden_cpu = any_hidden ? hidden.cpu().contiguous() : at::Tensor();
  std::vector<AnswerResult> results(reqs.size());
  std::vector<char> ticket_given(info.boundary_tickets.size(), 0);
  int64_t row = 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    AnswerResult& res = results[r];
    res.state_tokens = static_cast<int64_t>(multimodal ? prompts[r].ids.size() : reqs[r].state.size());
    const size_t k = batch.state_of[r];  // ForwardInfo lists states in packing order
    res.cached_tokens = info.cached_tokens.at(k);
    if (!ticket_given[k]) {
      res.boundary_ticket = info.boundary_tickets.at(k);
      ticket_given[k] = 1;
    }
    for (const auto& q : reqs[r].questions) {
      res.question_tokens += static_cast<int64_t>(q.tokens.size());
      const auto from = labels.offsets[row], to = labels.offsets[row + 1];
      QuestionAnswer a;
      a.label_logits.assign(labels.logits.begin() + from, labels.logits.begin() + to);
      a.label_log_probs.assign(labels.log_probs.begin() + from, labels.log_probs.begin() + to);
      if (reqs[r].want_hidden) {
        const float* h = hidden_cpu.data_ptr<float>() + row * hidden_cpu.size(1);
        a.hidden.assign(h, h + hidden_cpu.size(1));
      }
      ++row;
      res.answers.push_back(std::move(a));
    }
  }
  return results;
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
