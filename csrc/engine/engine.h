// The engine: one loaded model and the request-level logic around it
// (validation, packing, readout). It is used from the engine thread only.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/block_pool.h"
#include "runner/device.h"
#include "engine/engine_options.h"
#include "model/hidden_state_model.h"
#include "vision/image_prompt.h"
#include "vision/vision_cache.h"
#include "vision/vision_tower.h"

namespace tq {

struct ForwardTrace;  // model/transformer.h
class FewRowsGemm;    // kernels/aten/few_rows_gemm.h
class PagedModel;     // runner/paged_model.h
struct PackedRequests;  // batch/pack_requests.h
struct LabelReadout;    // engine/readout.h
struct RequestLimits;   // engine/request_checks.h
struct LaunchedBatch;   // engine/launched_batch.h

// A question as the engine takes it: its token ids (after the state), its labels, where to read them.
struct QuestionTokens {
  std::vector<int64_t> tokens;
  std::vector<int64_t> label_ids;
  int64_t readout_index = -1;  // into tokens; -1 = last token
  float temperature = 1.0f;    // of the label log-probabilities

  int64_t readout_at() const { return readout_index < 0 ? static_cast<int64_t>(tokens.size()) - 1 : readout_index; }
};

// An image of a request, decoded and sized by the image engine process (src/images/preprocess.ts).
struct ImageInput {
  at::Tensor rgb;  // [H, W, 3] uint8, sides multiples of 28
  ImageKey key{};  // SHA-256 of the pixels, size, recipe and model
};

struct AnswerRequest {
  // With images: one <|image_pad|> per image where it stands (vision/image_prompt.h).
  std::vector<int64_t> state;
  std::vector<ImageInput> images;
  std::vector<QuestionTokens> questions;
  bool want_hidden = false;
  // A tenant's cache salt (empty: none): its state's prefix-cache blocks and its batch's shared state
  // computation are its own (cache/block_pool.h). Any bytes; the server bounds it.
  std::string cache_salt;
};

struct QuestionAnswer {
  std::vector<float> label_logits;
  std::vector<float> label_log_probs;  // log-softmax of label_logits / temperature
  std::vector<float> hidden;  // filled when want_hidden
};

struct AnswerResult {
  std::vector<QuestionAnswer> answers;
  double state_ms = 0, questions_ms = 0, readout_ms = 0;  // of the whole call (a batch shares them)
  double plan_ms = 0;  // the host's work before its steps run: the requests checked and packed, then ForwardInfo::plan_ms
  double graph_launch_ms = 0;  // ForwardInfo::graph_launch_ms
  int64_t graph_launches = 0;  // ForwardInfo::graph_launches
  int64_t state_tokens = 0, question_tokens = 0;
  int64_t cached_tokens = 0;     // state tokens that came from the prefix cache
  int64_t computed_tokens = 0;   // tokens the whole call computed (a batch shares it)
  int64_t padding_tokens = 0;    // padding tokens its bucketed steps computed besides (cudaGraphs)
  int64_t graph_replays = 0;     // its steps that replayed a CUDA graph an earlier step captured (CPU: ran from its buffers, checked)
  int64_t boundary_ticket = -1;  // the state's boundary awaiting register_boundary, or -1
  bool overlapped = false;       // launched while the call before it was unfinished (addon/engine_thread.h)
};

struct EngineInfo {
  std::string format, architecture, dtype, stored_dtype, register_boundary;
  // Set when the requested dtype could not be used on this CPU, saying what runs instead and why.
  std::string dtype_note;
  std::string kernels;  // the layers' kernels: "avx512", "avx2", "generic" (the engine's CPU kernels), "aten", or "libtorch" (TorchScript)
  // The CPU kernels' level: how it was chosen ("measured", "cached", "re-measured", "forced", "only"; ""
  // off the engine's CPU kernels), whether the machine was busy as it was measured (to be measured
  // again), the rounds measured (0 unless measured now), and, measured, each level's rate on the
  // model's GEMMs (GFLOP/s, fastest first). Every level gives the same bits (docs/arithmetic.md): the
  // choice is a matter of speed alone.
  std::string level_choice;
  bool level_busy = false;
  int level_rounds = 0;
  std::vector<std::pair<std::string, double>> level_rates;
  std::string attention = "direct";  // EngineOptions::attention, as it runs
  std::string state_attention;       // EngineOptions::state_attention with the cascade; "" without it
  bool cuda_graphs = false;           // EngineOptions::cuda_graphs
  int64_t cuda_graph_chunks = 1;      // EngineOptions::cuda_graph_chunks
  std::string quantization = "none";  // of the linear layers' weights (kernels/quantization.h)
  std::string arithmetic = "portable";  // EngineOptions::arithmetic
  std::string quantized_kernels;      // int8: "avx512-vnni", "avx2" or "generic"
  double weights_ms = 0;              // reading (and quantizing) the weights at load
  int64_t linear_bytes = 0;           // the layers' linear weights as the kernels keep them
  DeviceInfo device;
  int64_t vocab_size = 0, hidden_size = 0, context_limit = 0, block_size = 0, cache_blocks = 0, cache_bytes = 0;
  // What sized the KV cache (PagedModel::cache_sized_by; "" for TorchScript), and the share asked for.
  std::string cache_sized_by;
  double gpu_memory_utilization = 0;
  int threads = 0;
  bool prefix_cache = false;
  bool batch_invariant = false;
  bool own_gemm = false;  // EngineOptions::own_gemm
  std::optional<VisionConfig> vision;  // a vision-language model's vision tower
  // A mixture of experts' router (ModelConfig::moe); and the parameters, in all and those a token computes with
  // (a MoE model's: its k experts'; a dense model's: all), embeddings included, as model cards count them.
  std::optional<MoeConfig> moe;
  int64_t parameters = 0, active_parameters = 0;
  ImageTokens image_tokens;
};

// What the engine keeps besides the weights and the KV cache, all bounded (sizes for /health).
struct MemoryStats {
  int64_t attention_buffer_bytes = 0;       // worker threads' attention buffers, between steps
  int64_t attention_buffer_kept_bytes = 0;  // ... at most this much each
  int64_t cached_primitives = 0;            // oneDNN primitives (batch invariance off)
  int64_t cached_primitives_max = 0;        // ... at most this many
  int64_t pending_boundaries = 0;      // state boundaries awaiting registration
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  // Answers several requests in one forward pass. Requests with identical states share
  // one computation of the state; nothing else crosses between requests.
  std::vector<AnswerResult> answer_batch(const std::vector<AnswerRequest>& requests);
  // answer_batch in two halves (engine/launched_batch.h), for an engine thread that queues the next call before it
  // waits for this one: launch_batch checks and packs the requests and queues their forward pass and readout (on
  // CUDA it returns while the device runs them); finish_batch waits for them and makes the answers.
  std::unique_ptr<LaunchedBatch> launch_batch(std::vector<AnswerRequest> requests);
  std::vector<AnswerResult> finish_batch(LaunchedBatch& launched);
  // Full-vocabulary logits at every position of one sequence, [T, vocab] fp32 (reference checks).
  at::Tensor logits_all(const std::vector<int64_t>& tokens, const std::vector<ImageInput>& images = {});
  // Enters a state boundary left pending by answer() into the prefix cache; false when it was dropped.
  bool register_boundary(int64_t ticket) { return model_->register_boundary(ticket); }
  CacheStats cache_stats() const;
  VisionCacheStats vision_cache_stats() const { return vision_cache_ ? vision_cache_->stats() : VisionCacheStats{}; }
  MemoryStats memory_stats() const;
  // Measures the CPU kernels' levels again and moves to the fastest (PagedModel::remeasure_level);
  // info() says the outcome. Between calls, on the engine thread.
  void remeasure_level();
  const EngineInfo& info() const { return info_; }
  const HiddenStateModel& model() const { return *model_; }
  // The few-row GEMM's choices so far (kernels/aten/few_rows_gemm.h), where the layers run it; null elsewhere.
  const FewRowsGemm* few_rows_gemm() const;
  // Records the next forward passes' intermediate tensors (an HF checkpoint's; tq_cli selfcheck).
  void trace_forward(ForwardTrace* trace);

 private:
  // The constructor's steps: an HF checkpoint opened as a paged model (its options checked, then
  // the engine described), or a TorchScript export.
  void open_checkpoint(bool aten);
  void describe_checkpoint(const PagedModel& paged, const PagedModelOptions& options);
  // info_'s kernels, level and weights, as the paged model has them now.
  void describe_level(const PagedModel& paged);
  void open_torchscript(bool aten);
  // launch_batch's and finish_batch's steps (engine/engine_answers.cpp): the requests checked (a call with images:
  // its states expanded), packed into one segment forest, and, after the forward pass and the readout, each
  // request's answers.
  std::vector<ImagePrompt> checked_prompts(const std::vector<AnswerRequest>& requests, bool multimodal) const;
  PackedRequests pack(const std::vector<AnswerRequest>& requests, const std::vector<ImagePrompt>& prompts, bool multimodal);
  std::vector<AnswerResult> answers_of(const LaunchedBatch& launched, const LabelReadout& labels) const;
  // What a request is checked against (engine/request_checks.h).
  RequestLimits request_limits() const;
  // Refuses images to a model without a vision tower; `asker` names what sent them.
  void require_vision(const std::string& asker) const;
  // A state with images expanded for the text model (vision/image_prompt.h).
  ImagePrompt image_prompt(const std::vector<int64_t>& state, const std::vector<ImageInput>& images) const;
  // The images' embeddings, [image tokens, hidden], from the vision cache or the tower.
  at::Tensor image_embeddings(const std::vector<ImageInput>& images);
  EngineOptions options_;
  at::Device device_ = at::kCPU;
  std::unique_ptr<HiddenStateModel> model_;
  PagedModel* paged_ = nullptr;  // model_, when it is an HF checkpoint's paged model (not TorchScript)
  const VisionTower* vision_ = nullptr;  // model_'s, when it has one
  std::unique_ptr<VisionCache> vision_cache_;
  EngineInfo info_;
};

}  // namespace tq
