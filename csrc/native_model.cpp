#include "native_model.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "errors.h"

namespace tq {
namespace {

at::Tensor long_tensor(const std::vector<int64_t>& v) {
  return at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong));
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

NativeModel::NativeModel(const std::string& dir, const NativeModelOptions& options)
    : options_(options), checkpoint_(std::make_unique<Checkpoint>(dir)) {
  transformer_ = std::make_unique<Transformer>(*checkpoint_, options.dtype, options.context_limit);
  const auto& c = checkpoint_->config();
  const int64_t tokens = options.cache_tokens > 0 ? options.cache_tokens : 2 * options.context_limit;
  KvCacheShape shape{c.num_layers, c.num_kv_heads, c.head_dim, options.block_size,
                     (tokens + options.block_size - 1) / options.block_size, options.dtype};
  // Cached blocks are only valid for these weights in this dtype.
  const uint64_t identity = std::hash<std::string>{}(dir + "|" + c10::toString(options.dtype) + "|" + std::to_string(options.block_size));
  cache_ = std::make_unique<KvCache>(shape, identity);
}

at::Tensor NativeModel::final_hidden(const PackedTokens& packed, ForwardInfo& info) {
  const auto& lens = packed.segment_lengths;
  const int64_t n = static_cast<int64_t>(packed.ids.size());
  // Block tables: the state's (starting with what the prefix cache holds), then one per question.
  const std::vector<int64_t> state_tokens(packed.ids.begin(), packed.ids.begin() + lens[0]);
  std::unique_ptr<Sequence> state_seq;
  std::vector<std::unique_ptr<Sequence>> questions;
  for (int attempt = 0;; ++attempt) {
    try {
      auto cached = options_.prefix_cache && packed.use_prefix_cache ? cache_->pool().match(state_tokens) : BlockPool::Match{};
      state_seq = std::make_unique<Sequence>(*cache_, lens[0], std::move(cached));
      for (size_t s = 1; s < lens.size(); ++s) questions.push_back(std::make_unique<Sequence>(*cache_, lens[s]));
      break;
    } catch (const EngineError& e) {
      questions.clear();
      state_seq.reset();
      // Under memory pressure, boundaries waiting for registration give way first.
      if (e.code() != code::kCacheCapacity || attempt > 0 || drop_pending_boundaries() == 0) throw;
    }
  }
  const Sequence& state = *state_seq;
  const int64_t cached = state.cached_tokens();
  info.cached_tokens = cached;

  std::vector<int64_t> slots, segment_start;
  slots.reserve(n);
  for (int64_t i = 0; i < lens[0]; ++i) slots.push_back(state.slot(i));
  for (auto& q : questions)
    for (int64_t i = 0; i < q->length(); ++i) slots.push_back(q->slot(i));
  int64_t offset = 0;
  for (auto len : lens) {
    segment_start.push_back(offset);
    offset += len;
  }
  const auto segments = packed.segments();
  auto all_ids = long_tensor(packed.ids), all_pos = long_tensor(packed.positions()), all_seg = long_tensor(segments),
       all_slots = long_tensor(slots);

  auto out = at::empty({static_cast<int64_t>(packed.output_rows.size()), hidden_size()}, at::kFloat);
  // Steps of at most max_step_tokens over the flat list. The last state chunk
  // and the questions share a step when they fit: a separate step for a few
  // question tokens would read every weight once more (~0.1 s on a 0.5B model).
  std::vector<std::pair<int64_t, int64_t>> steps;
  // Cached state tokens are not computed again; the readout positions are in the questions, always computed.
  for (int64_t a = cached; a < n; a += options_.max_step_tokens) steps.push_back({a, std::min(n, a + options_.max_step_tokens)});

  for (auto [a, b] : steps) {
    auto t0 = std::chrono::steady_clock::now();
    // Keys: the state up to the step's end, and each question present in the step up to the step's end.
    std::vector<int64_t> keys;
    for (int64_t i = 0; i < std::min(b, lens[0]); ++i) keys.push_back(i);
    if (b > lens[0]) {
      for (int64_t s = std::max<int64_t>(1, segments[a]); s <= segments[b - 1]; ++s)
        for (int64_t i = segment_start[s]; i < std::min(b, segment_start[s] + lens[s]); ++i) keys.push_back(i);
    }
    std::vector<int64_t> local_rows, out_index, key_end(b - a);
    for (size_t j = 0; j < keys.size(); ++j)
      if (keys[j] >= a) key_end[keys[j] - a] = static_cast<int64_t>(j) + 1;
    for (size_t r = 0; r < packed.output_rows.size(); ++r) {
      const int64_t row = packed.output_rows[r];
      if (row >= a && row < b) {
        local_rows.push_back(row - a);
        out_index.push_back(static_cast<int64_t>(r));
      }
    }
    auto key_index = long_tensor(keys);
    StepBatch step{all_ids.slice(0, a, b),
                   all_pos.slice(0, a, b),
                   all_seg.slice(0, a, b),
                   all_slots.slice(0, a, b),
                   key_end,
                   all_slots.index_select(0, key_index),
                   all_pos.index_select(0, key_index),
                   all_seg.index_select(0, key_index),
                   local_rows};
    auto hidden = transformer_->forward(step, *cache_);
    if (!out_index.empty()) out.index_copy_(0, long_tensor(out_index), hidden);
    // A step holding both is attributed by token count.
    const double ms = ms_since(t0), state_share = static_cast<double>(std::max<int64_t>(0, std::min(b, lens[0]) - a)) / (b - a);
    info.state_ms += ms * state_share;
    info.questions_ms += ms * (1 - state_share);
  }
  if (options_.prefix_cache && packed.use_prefix_cache) {
    const bool now = options_.boundary == BoundaryRegistration::Before;
    cache_->pool().register_prefix(state.blocks(), state_tokens, /*include_partial=*/now);
    if (!now && lens[0] % options_.block_size != 0) {
      // Hold the blocks until the server registers the boundary after its response.
      PendingBoundary p{state.blocks(), state_tokens};
      cache_->pool().retain(p.blocks);
      info.boundary_ticket = next_ticket_++;
      pending_.emplace(info.boundary_ticket, std::move(p));
    }
  }
  return out;
}

bool NativeModel::register_boundary(int64_t ticket) {
  auto it = pending_.find(ticket);
  if (it == pending_.end()) return false;  // dropped under memory pressure
  cache_->pool().register_prefix(it->second.blocks, it->second.tokens, /*include_partial=*/true);
  cache_->pool().release(it->second.blocks);
  pending_.erase(it);
  return true;
}

int64_t NativeModel::drop_pending_boundaries() {
  const int64_t n = static_cast<int64_t>(pending_.size());
  for (auto& [ticket, p] : pending_) cache_->pool().release(p.blocks);
  pending_.clear();
  return n;
}

}  // namespace tq
