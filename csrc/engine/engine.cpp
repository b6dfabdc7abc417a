#include "engine/engine.h"

#include <ATen/Parallel.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <map>

#include "batch/pack_requests.h"
#include "common/errors.h"
#include "engine/host_allocator.h"
#include "engine/paged_model.h"
#include "engine/readout.h"
#include "kernels/cpu/cpu_layer_kernels.h"
#include "kernels/label_readout_math.h"
#include "kernels/shifted_layer_kernels.h"
#include "model/moe.h"
#include "model/scripted_model.h"
#include "vision/patches.h"

// ATen's parallel_for compiles to a serial loop where OpenMP is off: the
// engine's own kernels (attention, softmax, SwiGLU, RMSNorm, RoPE) would run on
// one thread, silently.
// (A CUDA build leaves OpenMP to its libtorch: its CPU kernels run for parity checks only.)
#if !defined(_OPENMP) && !TQ_CUDA
#error "build the engine with -fopenmp (CMakeLists.txt and binding.gyp do)"
#endif

namespace tq {
namespace {

at::ScalarType parse_dtype(const std::string& d) {
  if (d == "fp32" || d == "float32") return at::kFloat;
  if (d == "bf16" || d == "bfloat16") return at::kBFloat16;
  throw EngineError(code::kBadRequest, "dtype must be fp32 or bf16, got " + d);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw EngineError(code::kCheckpointInvalid, path + ": no such file or folder");
  return S_ISDIR(st.st_mode);
}

// What the options leave to the device, chosen: on CUDA the fast path (the fused row kernels, the cascade,
// CUDA graphs; checked against ATen layer by layer and faster on every workload, docs/gpu.md), ATen's ops
// where the weights are fp8 (the fused kernels take unquantized weights); on the CPU the engine's own kernels.
// The engine's info then names what runs.
EngineOptions resolve_forward_defaults(EngineOptions options, const at::Device& device) {
  const bool cuda = device.is_cuda();
  if (options.kernels.empty() && cuda) options.kernels = options.quantization == "fp8" ? "aten" : "fused";
  if (!options.cuda_graphs) options.cuda_graphs = cuda && options.kernels == "fused";
  return options;
}

// Whether the layers run on ATen's ops (kernels/aten/) rather than the engine's own CPU kernels.
bool uses_aten_kernels(const EngineOptions& options, const at::Device& device) {
  if (!options.kernels.empty() && options.kernels != "engine" && options.kernels != "aten" && options.kernels != "fused")
    throw EngineError(code::kBadRequest, "kernels must be engine, aten or fused, got " + options.kernels);
  if (options.kernels == "engine" && !device.is_cpu())
    throw EngineError(code::kBadRequest, "the engine's own kernels run on the CPU; on " + options.device + " the kernels are aten or fused");
  return options.kernels == "aten" || options.kernels == "fused" || !device.is_cpu();
}

// The engine-wide options, checked before anything is loaded.
void check_engine_options(const EngineOptions& options) {
  if (options.block_size <= 0 || options.max_step_tokens <= 0 || options.context_limit <= 0)
    throw EngineError(code::kBadRequest, "blockSize, maxStepTokens and contextLimit must be positive");
  if (options.register_boundary != "after" && options.register_boundary != "before")
    throw EngineError(code::kBadRequest, "registerBoundary must be after or before, got " + options.register_boundary);
}

// Without batch invariance the CPU matmuls are oneDNN's; where it has no bf16 matmul (CPUs without
// AVX-512), bf16 would fail at the first forward pass, so the engine computes in fp32 and says so in `note`.
at::ScalarType computed_dtype(const EngineOptions& options, at::ScalarType dtype, bool aten, std::string& note) {
  if (aten || options.batch_invariant) return dtype;
#if TQ_ONEDNN
  if (dtype == at::kBFloat16 && !cpu_bf16_without_invariance()) {
    note = "bf16 was asked for, but oneDNN has no bf16 matmul on this CPU (it needs AVX-512): computing in fp32";
    return at::kFloat;
  }
  return dtype;
#else
  throw EngineError(code::kBadRequest, "this build has no oneDNN: on the CPU only the batch-invariant kernels run");
#endif
}

// Whether the native arithmetic is asked for, and refused with the reason where it cannot run.
bool check_arithmetic(const EngineOptions& options, at::ScalarType dtype, bool aten, Quantization quantization) {
  if (options.arithmetic == "portable") return false;
  if (options.arithmetic != "native") throw EngineError(code::kBadRequest, "arithmetic must be portable or native, got " + options.arithmetic);
  const auto refuse = [](const std::string& why) { throw EngineError(code::kBadRequest, "arithmetic native: " + why); };
  if (aten || !options.batch_invariant || !options.kernels.empty()) refuse("it is the engine's own invariant CPU kernels' (not aten, oneDNN or fused)");
  if (dtype != at::kBFloat16) refuse("it is bf16's (AMX's bf16 tiles); fp32 has the portable arithmetic only");
  if (quantization != Quantization::None) refuse("int8 is exact on every path, AMX's included: its arithmetic is the portable one");
  if (!native_arithmetic_available()) refuse("this CPU has no AMX-BF16 (Intel Xeon from Sapphire Rapids on, with Linux granting tile state)");
  return true;
}

// An HF checkpoint's paged model options, checked: the kernels' level, the quantization, the
// attention and the forward they allow together.
PagedModelOptions paged_options(const EngineOptions& options, at::ScalarType dtype, const at::Device& device, bool aten) {
  Isa isa;
  Quantization quantization;
  try {
    isa = isa_for(options.isa);
    quantization = parse_quantization(options.quantization);
    check_buffer_shift(options.buffer_shift);
  } catch (const std::invalid_argument& e) {
    throw EngineError(code::kBadRequest, e.what());
  }
  if (!(options.gpu_memory_utilization >= 0 && options.gpu_memory_utilization <= 1))
    throw EngineError(code::kBadRequest, "gpu_memory_utilization must be in [0, 1] (0: the KV cache sized by the context limit), got " +
                                             std::to_string(options.gpu_memory_utilization));
  if (!options.attention.empty() && options.attention != "kernels" && options.attention != "cascade")
    throw EngineError(code::kBadRequest, "attention must be kernels or cascade, got " + options.attention);
  // The fused forward's attention is the cascade (its GPU form: FlashAttention-2 levels).
  const bool fused = options.kernels == "fused";
  if (fused && options.attention == "kernels") throw EngineError(code::kBadRequest, "the fused kernels attend as a cascade: attention kernels is not theirs");
  if (fused && quantization != Quantization::None) throw EngineError(code::kBadRequest, "the fused kernels run unquantized weights (quantization none)");
  const bool cascade = fused || options.attention == "cascade";
  if (options.buffer_shift != 0 && aten) throw EngineError(code::kBadRequest, "bufferShift is for the engine's own CPU kernels, not aten");
  if (quantization == Quantization::Int8 && aten)
    throw EngineError(code::kBadRequest, "int8 weights run on the engine's CPU kernels only; on CUDA, fp8 is the quantization to ask for");
  if (quantization == Quantization::Fp8 && !device.is_cuda())
    throw EngineError(code::kBadRequest, "fp8 weights run on CUDA only (the H100's fp8 tensor cores); on the CPU use int8");
  const bool native = check_arithmetic(options, dtype, aten, quantization);
  PagedModelOptions o{dtype, options.block_size, options.cache_tokens, options.cache_mib, options.max_step_tokens, options.context_limit,
                       options.prefix_cache, options.batch_invariant, isa, device, aten,
                       options.register_boundary == "before" ? BoundaryRegistration::Before : BoundaryRegistration::After, quantization,
                       options.gpu_memory_utilization, options.buffer_shift, cascade, options.cuda_graphs.value_or(false), fused};
  o.measure_level = options.isa.empty();
  o.native_arithmetic = native;
  return o;
}

}  // namespace

Engine::Engine(const EngineOptions& options) : options_(options) {
  keep_freed_host_memory();
  const auto dtype = parse_dtype(options.dtype);
  if (options.threads > 0) at::set_num_threads(options.threads);
  check_engine_options(options);
  info_.context_limit = options.context_limit;
  device_ = parse_device(options.device);
  options_ = resolve_forward_defaults(options, device_);
  const bool aten = uses_aten_kernels(options_, device_);
  if (is_directory(options.path)) open_checkpoint(dtype, aten);
  else open_torchscript(dtype, aten);
  info_.architecture = model_->describe();
  info_.vocab_size = model_->vocab_size();
  info_.hidden_size = model_->hidden_size();
  info_.threads = at::get_num_threads();
  info_.device = describe_device(device_);
}

void Engine::open_checkpoint(at::ScalarType dtype, bool aten) {
  const auto o = paged_options(options_, computed_dtype(options_, dtype, aten, info_.dtype_note), device_, aten);
  auto paged = std::make_unique<PagedModel>(options_.path, o);
  info_.dtype = o.dtype == at::kFloat ? "fp32" : "bf16";
  describe_checkpoint(*paged, o);
  if ((vision_ = paged->vision())) vision_cache_ = std::make_unique<VisionCache>(options_.vision_cache_mib << 20);
  model_ = std::move(paged);
}

// What /health and the start-up line say of a paged model.
void Engine::describe_checkpoint(const PagedModel& paged, const PagedModelOptions& o) {
  info_.quantization = quantization_name(o.quantization);
  info_.arithmetic = o.native_arithmetic ? "native" : "portable";
  describe_level(paged);
  info_.prefix_cache = options_.prefix_cache;
  info_.register_boundary = options_.register_boundary;
  info_.format = "hf";
  info_.attention = o.cascade_attention ? "cascade" : "kernels";
  info_.cuda_graphs = options_.cuda_graphs.value_or(false);
  // Only the engine's own CPU kernels promise it; cuBLAS and SDPA choose their reductions by shape.
  info_.batch_invariant = options_.batch_invariant && !o.aten_kernels;
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
  const auto quantization = paged.options().quantization;
  if (quantization == Quantization::Int8) info_.quantized_kernels = int8_kernel_name(paged.options().isa);  // the level chosen
  if (quantization == Quantization::Fp8) info_.quantized_kernels = kFp8KernelName;
  info_.weights_ms = paged.weights_ms();
  info_.linear_bytes = paged.linear_bytes();
  info_.kernels = paged.kernels().name();
  const auto& choice = paged.level_choice();
  info_.level_choice = choice.how;
  info_.level_busy = choice.busy;
  info_.level_rates.clear();
  for (const auto& r : choice.rates) info_.level_rates.emplace_back(isa_name(r.level), r.gflops);
}

void Engine::remeasure_level() {
  auto* paged = dynamic_cast<PagedModel*>(model_.get());
  if (!paged) return;
  if (paged->remeasure_level()) vision_ = paged->vision();
  describe_level(*paged);
}

void Engine::open_torchscript(at::ScalarType dtype, bool aten) {
  if (!device_.is_cpu() || aten) throw EngineError(code::kBadRequest, "TorchScript models run on the CPU with libtorch's kernels only");
  if (options_.quantization != "none") throw EngineError(code::kBadRequest, "TorchScript models run with their weights as stored: quantization must be none");
  if (options_.arithmetic != "portable") throw EngineError(code::kBadRequest, "TorchScript models run libtorch's kernels: arithmetic must be portable");
  if (options_.attention == "cascade") throw EngineError(code::kBadRequest, "TorchScript models run their own attention: attention cascade needs an HF checkpoint");
  model_ = std::make_unique<ScriptedModel>(options_.path, dtype);
  info_.dtype = dtype == at::kFloat ? "fp32" : "bf16";
  info_.format = "torchscript";
  info_.kernels = "libtorch";
  info_.stored_dtype = info_.dtype;
}

void Engine::check_tokens(const std::vector<int64_t>& ids, const std::string& what) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= model_->vocab_size())
      throw EngineError(code::kBadRequest, what + " token " + std::to_string(i) + " is " + std::to_string(ids[i]) +
                                               ", outside the vocabulary [0, " + std::to_string(model_->vocab_size()) + ")");
}

void Engine::check_request(const AnswerRequest& req, int64_t state_len, const std::string& where) const {
  if (req.questions.empty()) throw EngineError(code::kBadRequest, where + "a request needs at least one question");
  check_tokens(req.state, where + "state");
  const int64_t pad = vision_ ? info_.image_tokens.image_pad : -1;
  if (vision_ && req.images.empty() && std::count(req.state.begin(), req.state.end(), pad) > 0)
    throw EngineError(code::kBadRequest, where + "the state holds image placeholder tokens but the request has no images");
  for (size_t qi = 0; qi < req.questions.size(); ++qi) {
    const auto& q = req.questions[qi];
    const std::string name = where + "question " + std::to_string(qi);
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (len == 0) throw EngineError(code::kBadRequest, name + " has no tokens");
    const int64_t prompt = state_len + len;
    if (prompt > options_.context_limit)
      throw EngineError(code::kContextOverflow,
                        "the rendered prompt of " + name + " is " + std::to_string(prompt) + " tokens, longer than the context of " +
                            std::to_string(options_.context_limit) + " tokens",
                        {{"promptTokens", prompt}, {"contextLimit", options_.context_limit}, {"question", static_cast<int64_t>(qi)}});
    check_tokens(q.tokens, name);
    if (vision_ && std::count(q.tokens.begin(), q.tokens.end(), pad) > 0)
      throw EngineError(code::kBadRequest, name + " holds an image placeholder token; images belong in the state");
    if (q.label_ids.empty()) throw EngineError(code::kBadRequest, name + " has no label ids");
    if (static_cast<int64_t>(q.label_ids.size()) > readout::kMaxLabels)
      throw EngineError(code::kBadRequest, name + " has " + std::to_string(q.label_ids.size()) + " labels; at most " + std::to_string(readout::kMaxLabels));
    if (!(q.temperature > 0) || !std::isfinite(q.temperature))
      throw EngineError(code::kBadRequest, name + " temperature must be a positive number");
    check_tokens(q.label_ids, name + " label");
    const int64_t at = q.readout_at();
    if (at >= len) throw EngineError(code::kBadRequest, name + " readout index " + std::to_string(at) + " is past its " + std::to_string(len) + " tokens");
  }
}

ImagePrompt Engine::image_prompt(const std::vector<int64_t>& state, const std::vector<ImageInput>& images) const {
  std::vector<PromptImageShape> shapes;
  for (const auto& image : images) {
    const auto [h, w] = merged_grid(image.rgb, *info_.vision);
    shapes.push_back({h, w, image.key});
  }
  return expand_image_prompt(state, shapes, info_.image_tokens);
}

at::Tensor Engine::image_embeddings(const std::vector<ImageInput>& images) {
  std::vector<at::Tensor> parts;
  for (const auto& image : images) {
    auto embeds = vision_cache_->find(image.key);
    if (!embeds.defined()) {
      embeds = vision_->embed(image_patches(image.rgb, *info_.vision));
      vision_cache_->insert(image.key, embeds);
    }
    parts.push_back(embeds);
  }
  return at::cat(parts);
}

std::vector<AnswerResult> Engine::answer_batch(const std::vector<AnswerRequest>& reqs) {
  if (reqs.empty()) throw EngineError(code::kBadRequest, "a batch needs at least one request");
  // A call with images is multimodal throughout (batch/packed_tokens.h): its states are expanded around their images.
  const bool multimodal = std::any_of(reqs.begin(), reqs.end(), [](const AnswerRequest& r) { return !r.images.empty(); });
  if (multimodal && !vision_) throw EngineError(code::kBadRequest, "the request has images but " + info_.architecture + " has no vision tower");
  const auto prompts = checked_prompts(reqs, multimodal);
  auto batch = pack(reqs, prompts, multimodal);
  ForwardInfo info;
  const auto hidden = model_->final_hidden(batch.tokens, info);  // on CUDA, finished: the paged model waits after each step
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
    check_request(reqs[r], static_cast<int64_t>(multimodal ? prompts[r].ids.size() : reqs[r].state.size()), where);
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
  if (auto* paged = dynamic_cast<const PagedModel*>(model_.get())) m.pending_boundaries = paged->pending_boundaries();
  return m;
}

CacheStats Engine::cache_stats() const {
  if (auto* paged = dynamic_cast<const PagedModel*>(model_.get())) return paged->cache().pool().stats();
  return {};
}

at::Tensor Engine::logits_all(const std::vector<int64_t>& state, const std::vector<ImageInput>& images) {
  if (!images.empty() && !vision_) throw EngineError(code::kBadRequest, "logitsAll has images but " + info_.architecture + " has no vision tower");
  const auto prompt = images.empty() ? ImagePrompt{} : image_prompt(state, images);
  const auto& tokens = images.empty() ? state : prompt.ids;
  if (tokens.empty()) throw EngineError(code::kBadRequest, "logitsAll needs at least one token");
  if (static_cast<int64_t>(tokens.size()) > options_.context_limit)
    throw EngineError(code::kContextOverflow, "the sequence is " + std::to_string(tokens.size()) + " tokens, longer than the context of " +
                                                  std::to_string(options_.context_limit) + " tokens",
                      {{"promptTokens", static_cast<int64_t>(tokens.size())}, {"contextLimit", options_.context_limit}});
  check_tokens(tokens, "sequence");
  // The result is tokens x vocab floats: bound it (1 GiB) rather than fail in the allocator.
  if (static_cast<int64_t>(tokens.size()) * model_->vocab_size() > (int64_t{1} << 28))
    throw EngineError(code::kBadRequest, "logitsAll of " + std::to_string(tokens.size()) + " tokens x " +
                                             std::to_string(model_->vocab_size()) + " vocabulary exceeds 2^28 logits");
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
  ForwardInfo info;
  return full_logits(model_->final_hidden(packed, info), model_->lm_head(), model_->final_logit_softcap()).cpu().contiguous();
}

void Engine::trace_forward(ForwardTrace* trace) {
  auto* paged = dynamic_cast<PagedModel*>(model_.get());
  if (!paged) throw EngineError(code::kBadRequest, "a forward trace needs an HF checkpoint (TorchScript models run whole)");
  paged->trace_into(trace);
}

}  // namespace tq
