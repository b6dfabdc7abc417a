#include "native_model.h"

#include <algorithm>
#include <chrono>

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
  cache_ = std::make_unique<KvCache>(shape);
}

at::Tensor NativeModel::final_hidden(const PackedTokens& packed, ForwardTimes& times) {
  const auto& lens = packed.segment_lengths;
  const int64_t n = static_cast<int64_t>(packed.ids.size());
  // Block tables: the state's sequence, and one child sequence per question.
  Sequence state(*cache_, lens[0]);
  std::vector<std::unique_ptr<Sequence>> questions;
  for (size_t s = 1; s < lens.size(); ++s) questions.push_back(std::make_unique<Sequence>(*cache_, lens[s], &state));

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
  for (int64_t a = 0; a < n; a += options_.max_step_tokens) steps.push_back({a, std::min(n, a + options_.max_step_tokens)});

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
    times.state_ms += ms * state_share;
    times.questions_ms += ms * (1 - state_share);
  }
  return out;
}

}  // namespace tq
