#include "runner/paged_model.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "common/clock.h"
#include "common/errors.h"
#include "common/profile_scope.h"
#include "runner/device.h"
#include "runner/step_inputs.h"
#include "batch/step_buckets.h"
#include "kernels/host_upload.h"

namespace tq {

int64_t PagedModel::kv_blocks(int64_t bytes_per_block) {
  const auto& o = options_;
  const auto blocks_for_tokens = [&](int64_t tokens) { return (tokens + o.block_size - 1) / o.block_size; };
  if (o.cache_mib > 0) {
    cache_sized_by_ = "mib";
    return std::max<int64_t>(1, o.cache_mib * (int64_t{1} << 20) / bytes_per_block);
  }
  if (o.cache_tokens > 0) {
    cache_sized_by_ = "tokens";
    return blocks_for_tokens(o.cache_tokens);
  }
  if (o.kernels.device.is_cuda() && o.gpu_memory_utilization > 0) {
    // Measured after the weights (and their load-time copies) are in place and freed.
    cache_sized_by_ = "gpu-memory";
    const auto budget = static_cast<int64_t>(o.gpu_memory_utilization * static_cast<double>(free_device_bytes(o.kernels.device)));
    return std::max<int64_t>(1, budget / bytes_per_block);
  }
  cache_sized_by_ = "context";
  return blocks_for_tokens(2 * o.context_limit);
}

PagedModel::PagedModel(const std::string& dir, const PagedModelOptions& options)
    : options_(options), checkpoint_(std::make_unique<Checkpoint>(dir)) {
  choose_level();
  build_layers();
  const auto& c = checkpoint_->config();
  KvCacheShape shape{c.num_layers, c.num_kv_heads, c.head_dim, options.block_size, 0, options.kernels.dtype, options.kernels.device};
  shape.num_blocks = kv_blocks(shape.bytes_per_block());
  // Cached blocks are only valid for these weights in this dtype, stored this way.
  const uint64_t identity = std::hash<std::string>{}(dir + "|" + c10::toString(options.kernels.dtype) + "|" + std::to_string(options.block_size) + "|" +
                                                     quantization_name(options.kernels.quantization));
  cache_ = std::make_unique<KvCache>(shape, identity);
  pending_ = std::make_unique<PendingBoundaries>(cache_->pool());
  if (options.kernels.fixed_shapes) graphs_ = std::make_unique<StepGraphs>(*transformer_, *cache_, options.graph_chunks);
}

void PagedModel::build_layers() {
  const auto& o = options_;
  auto kernels = make_layer_kernels(o.kernels);
  const auto t0 = std::chrono::steady_clock::now();
  auto transformer = std::make_unique<Transformer>(*checkpoint_, o.kernels.dtype, o.context_limit, std::move(kernels));
  weights_ms_ = ms_since(t0);
  // The tower reads the text model's kernels: it goes before them.
  vision_.reset();
  transformer_ = std::move(transformer);
  if (checkpoint_->config().vision) vision_ = std::make_unique<VisionTower>(*checkpoint_, transformer_->kernels(), o.kernels.dtype);
}

std::vector<GemmShape> PagedModel::gemm_shapes() const {
  // The model's linear layers, [out, in]: q, k and v stacked; o; gate (up alike); down.
  const auto& c = checkpoint_->config();
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  return {{q + 2 * kv, h}, {h, q}, {c.intermediate_size, h}, {h, c.intermediate_size}};
}

void PagedModel::choose_level() {
  // Only the engine's invariant CPU kernels have levels to choose from (oneDNN and ATen choose their own).
  if (options_.kernels.aten || !options_.kernels.batch_invariant) return;
  level_choice_ = {options_.kernels.isa, "forced", false, {}};
  if (!options_.measure_level) return;
  level_choice_ = tq::choose_level(gemm_shapes(), options_.kernels.dtype, options_.kernels.quantization);
  options_.kernels.isa = level_choice_.level;
}

bool PagedModel::remeasure_level() {
  if (!level_choice_.measurable()) return false;
  level_choice_ = tq::remeasure_level(gemm_shapes(), options_.kernels.dtype, options_.kernels.quantization);
  // A busy measurement does not move a level; any level gives the same bits, the KV cache's included.
  if (level_choice_.busy || level_choice_.level == options_.kernels.isa) {
    level_choice_.level = options_.kernels.isa;
    return false;
  }
  options_.kernels.isa = level_choice_.level;
  build_layers();
  return true;
}

at::Tensor PagedModel::step_forward(const StepBatch& step, ForwardInfo& info) {
  TQ_PROFILE_SCOPE("tq::step_forward");
  const auto planning = std::chrono::steady_clock::now();
  // A traced forward computes the output rows alone in its last layer, as the path it is compared with does.
  auto inputs = prepare_step(*transformer_, step, !tracing_);
  const bool graph = graphs_ && !inputs.launch_shape.empty();
  if (!graph) place_step(inputs, options_.kernels.device);  // a graph's step goes into its graph's buffers
  info.plan_ms += ms_since(planning);
  if (inputs.launch_shape.empty()) return transformer_->run(inputs, *cache_);
  // A step of a fixed launch shape (a graph's) computes every row: the output rows are taken from them.
  const auto rows = index_on(options_.kernels.device, step.output_rows);
  if (!graph) return transformer_->run(inputs, *cache_).index_select(0, rows);
  GraphStep ran;
  auto hidden = graphs_->run(std::move(inputs), ran).index_select(0, rows);
  info.plan_ms += ran.host_ms;
  info.graph_launch_ms += ran.launch_ms;
  info.graph_launches += ran.launches;
  info.graph_replays += ran.replayed;
  return hidden;
}

std::vector<std::unique_ptr<Sequence>> PagedModel::allocate(const PackedTokens& packed, const std::vector<int64_t>& offsets, bool caching) {
  const auto& lens = packed.segment_lengths;
  const size_t n_seg = lens.size();
  // The whole call must fit in the cache at once: say so with the call's own need, not the
  // shortfall of whichever segment's allocation happens to fail first.
  const auto& shape = cache_->shape();
  int64_t needed_blocks = 0;
  for (auto len : lens) needed_blocks += (len + shape.block_size - 1) / shape.block_size;
  if (needed_blocks > shape.num_blocks)
    throw EngineError(code::kCacheCapacity,
                      "the call needs " + std::to_string(needed_blocks) + " KV blocks of " + std::to_string(shape.block_size) + " tokens (" +
                          std::to_string(packed.ids.size()) + " tokens in " + std::to_string(n_seg) +
                          " segments: states, shared question text and questions, each starting a block) but the cache holds " +
                          std::to_string(shape.num_blocks) + " blocks (" + std::to_string(cache_->bytes() >> 20) +
                          " MiB); raise --cache-mib or ask fewer questions per request",
                      {{"neededBlocks", needed_blocks}, {"totalBlocks", shape.num_blocks}});

  std::vector<std::unique_ptr<Sequence>> seqs(n_seg);
  for (int attempt = 0;; ++attempt) {
    try {
      for (size_t s = 0; s < n_seg; ++s) {
        auto cached = caching && packed.is_root(s) ? cache_->pool().match(packed.segment_cache_keys(s, offsets), packed.state_salts[s]) : BlockPool::Match{};
        seqs[s] = std::make_unique<Sequence>(*cache_, lens[s], std::move(cached));
      }
      return seqs;
    } catch (const EngineError& e) {
      for (auto& q : seqs) q.reset();
      // Under memory pressure, boundaries waiting for registration give way first.
      if (e.code() != code::kCacheCapacity || attempt > 0 || pending_->drop_all() == 0) throw;
    }
  }
}

ForwardResult PagedModel::final_hidden(const PackedTokens& packed) {
  TQ_PROFILE_SCOPE("tq::final_hidden");
  const auto planning = std::chrono::steady_clock::now();
  const bool caching = options_.prefix_cache && packed.use_prefix_cache;
  const auto offsets = packed.segment_offsets();
  const auto seqs = allocate(packed, offsets, caching);
  const auto slots = slots_to_compute(packed, offsets, seqs);
  ForwardResult result;
  result.info.plan_ms = ms_since(planning);
  result.info.computed_tokens = static_cast<int64_t>(slots.compute.size());
  run_steps(packed, slots, result);
  // Registered as soon as the steps are queued: a later call's steps, queued behind these, read the blocks after they are written.
  register_states(packed, offsets, seqs, caching, result.info);
  return result;
}

PagedModel::Slots PagedModel::slots_to_compute(const PackedTokens& packed, const std::vector<int64_t>& offsets,
                                               const std::vector<std::unique_ptr<Sequence>>& seqs) const {
  // The readout positions are in the questions: always computed.
  Slots out;
  const auto& lens = packed.segment_lengths;
  for (size_t s = 0; s < lens.size(); ++s) {
    for (int64_t i = 0; i < lens[s]; ++i) out.slots.push_back(seqs[s]->slot(i));
    for (int64_t i = seqs[s]->cached_tokens(); i < lens[s]; ++i) out.compute.push_back(offsets[s] + i);
  }
  return out;
}

void PagedModel::run_steps(const PackedTokens& packed, const Slots& slots, ForwardResult& result) {
  auto& info = result.info;
  // Image embeddings only when some image token is computed (vision/vision_tower.h is the costly part).
  at::Tensor image_embeds;
  const auto& compute = slots.compute;
  if (packed.multimodal && std::any_of(compute.begin(), compute.end(), [&](int64_t i) { return packed.embed_rows[i] >= 0; })) {
    const auto t0 = std::chrono::steady_clock::now();
    image_embeds = packed.image_embeds();
    info.state_ms += ms_since(t0);
  }
  const auto device = options_.kernels.device;
  result.hidden = at::empty({static_cast<int64_t>(packed.output_rows.size()), hidden_size()}, at::TensorOptions().dtype(at::kFloat).device(device));
  std::vector<double> state_shares;
  auto timer = std::make_shared<StepTimer>(device);
  auto planning = std::chrono::steady_clock::now();
  const auto steps = plan_steps(packed, slots.slots, compute, options_.max_step_tokens, image_embeds);
  info.plan_ms += ms_since(planning);
  for (const auto& step : steps) {
    planning = std::chrono::steady_clock::now();
    state_shares.push_back(static_cast<double>(step.state_queries) / static_cast<double>(step.batch.token_ids.size(0)));
    StepBatch batch = step.batch;
    if (options_.kernels.fixed_shapes)
      if (const auto bucket = bucket_for(batch.token_ids.size(0), batch.key_slots.size(0))) {
        info.padding_tokens += bucket->tokens - batch.token_ids.size(0);
        pad_step(batch, *bucket, cache_->scratch_slot());
      }
    info.plan_ms += ms_since(planning);
    auto hidden = step_forward(batch, info);
    if (!step.output_index.empty()) result.hidden.index_copy_(0, index_on(device, step.output_index), hidden);
    timer->step_launched();
  }
  // CUDA runs asynchronously: the steps are done only once the timer has waited for the last.
  result.read_step_times = [timer, shares = std::move(state_shares)](ForwardInfo& info) {
    TQ_PROFILE_SCOPE("tq::wait_for_steps");
    const auto step_ms = timer->finish();
    // A step holding both is attributed by token count.
    for (size_t i = 0; i < step_ms.size(); ++i) {
      info.state_ms += step_ms[i] * shares[i];
      info.questions_ms += step_ms[i] * (1 - shares[i]);
    }
  };
}

void PagedModel::register_states(const PackedTokens& packed, const std::vector<int64_t>& offsets,
                                 const std::vector<std::unique_ptr<Sequence>>& seqs, bool caching, ForwardInfo& info) {
  const auto& lens = packed.segment_lengths;
  for (size_t s = 0; s < lens.size(); ++s) {
    if (!packed.is_root(s)) continue;
    info.cached_tokens.push_back(seqs[s]->cached_tokens());
    int64_t ticket = -1;
    // A state that came whole from the cache, its boundary with it, has every block registered already: hashing it
    // again found nothing new, and a registration queued after its answer kept a client's next request waiting.
    const bool whole_state_cached = seqs[s]->cached_tokens() >= lens[s];
    if (caching && !whole_state_cached) {
      const bool now = options_.boundary == BoundaryRegistration::Before;
      const auto tokens = packed.segment_cache_keys(s, offsets);
      cache_->pool().register_prefix(seqs[s]->blocks(), tokens, /*include_partial=*/now, packed.state_salts[s]);
      // Hold the blocks until the server registers the boundary after its response.
      if (!now && lens[s] % options_.block_size != 0) ticket = pending_->hold(seqs[s]->blocks(), tokens, packed.state_salts[s]);
    }
    info.boundary_tickets.push_back(ticket);
  }
}

bool PagedModel::register_boundary(int64_t ticket) { return pending_->register_boundary(ticket); }

}  // namespace tq
