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
  transformer_ = std::make_unique<Transformer>(*checkpoint_, options.dtype, options.context_limit, options.batch_invariant);
  const auto& c = checkpoint_->config();
  KvCacheShape shape{c.num_layers, c.num_kv_heads, c.head_dim, options.block_size, 0, options.dtype};
  const int64_t tokens = options.cache_tokens > 0 ? options.cache_tokens : 2 * options.context_limit;
  shape.num_blocks = options.cache_mib > 0 ? std::max<int64_t>(1, options.cache_mib * (int64_t{1} << 20) / shape.bytes_per_block())
                                           : (tokens + options.block_size - 1) / options.block_size;
  // Cached blocks are only valid for these weights in this dtype.
  const uint64_t identity = std::hash<std::string>{}(dir + "|" + c10::toString(options.dtype) + "|" + std::to_string(options.block_size));
  cache_ = std::make_unique<KvCache>(shape, identity);
}

at::Tensor NativeModel::final_hidden(const PackedTokens& packed, ForwardInfo& info) {
  const auto& lens = packed.segment_lengths;
  const size_t n_seg = lens.size();
  const int64_t n = static_cast<int64_t>(packed.ids.size());
  std::vector<int64_t> seg_start(n_seg);
  for (size_t s = 0, offset = 0; s < n_seg; offset += lens[s], ++s) seg_start[s] = static_cast<int64_t>(offset);
  auto tokens_of = [&](size_t s) {
    return std::vector<int64_t>(packed.ids.begin() + seg_start[s], packed.ids.begin() + seg_start[s] + lens[s]);
  };
  const bool caching = options_.prefix_cache && packed.use_prefix_cache;

  // The whole call must fit in the cache at once: say so with the call's own need, not the
  // shortfall of whichever segment's allocation happens to fail first.
  const auto& shape = cache_->shape();
  int64_t needed_blocks = 0;
  for (auto len : lens) needed_blocks += (len + shape.block_size - 1) / shape.block_size;
  if (needed_blocks > shape.num_blocks)
    throw EngineError(code::kCacheCapacity,
                      "the call needs " + std::to_string(needed_blocks) + " KV blocks of " + std::to_string(shape.block_size) + " tokens (" +
                          std::to_string(n) + " tokens in " + std::to_string(n_seg) + " segments: states, shared question text and questions, each starting a block) but the cache holds " +
                          std::to_string(shape.num_blocks) + " blocks (" + std::to_string(cache_->bytes() >> 20) +
                          " MiB); raise --cache-mib or ask fewer questions per request",
                      {{"neededBlocks", needed_blocks}, {"totalBlocks", shape.num_blocks}});

  // Block tables: each state's (starting with what the prefix cache holds) and each question's.
  std::vector<std::unique_ptr<Sequence>> seqs(n_seg);
  for (int attempt = 0;; ++attempt) {
    try {
      for (size_t s = 0; s < n_seg; ++s) {
        auto cached = caching && packed.is_root(s) ? cache_->pool().match(tokens_of(s)) : BlockPool::Match{};
        seqs[s] = std::make_unique<Sequence>(*cache_, lens[s], std::move(cached));
      }
      break;
    } catch (const EngineError& e) {
      for (auto& q : seqs) q.reset();
      // Under memory pressure, boundaries waiting for registration give way first.
      if (e.code() != code::kCacheCapacity || attempt > 0 || drop_pending_boundaries() == 0) throw;
    }
  }

  // Per flat token: its slot; and the tokens to compute (cached state prefixes are skipped;
  // the readout positions are in the questions, always computed).
  std::vector<int64_t> slots(n), compute;
  for (size_t s = 0; s < n_seg; ++s) {
    for (int64_t i = 0; i < lens[s]; ++i) slots[seg_start[s] + i] = seqs[s]->slot(i);
    for (int64_t i = seqs[s]->cached_tokens(); i < lens[s]; ++i) compute.push_back(seg_start[s] + i);
  }
  const auto segments = packed.segments();
  auto all_ids = long_tensor(packed.ids), all_pos = long_tensor(packed.positions()), all_seg = long_tensor(segments),
       all_parent = long_tensor(packed.parents()), all_root = long_tensor(packed.roots()), all_slots = long_tensor(slots);
  std::vector<int64_t> out_of_row(n, -1);
  for (size_t r = 0; r < packed.output_rows.size(); ++r) out_of_row[packed.output_rows[r]] = static_cast<int64_t>(r);

  auto out = at::empty({static_cast<int64_t>(packed.output_rows.size()), hidden_size()}, at::kFloat);
  const int64_t n_compute = static_cast<int64_t>(compute.size());
  info.computed_tokens = n_compute;
  for (int64_t a = 0; a < n_compute; a += options_.max_step_tokens) {
    const int64_t b = std::min(n_compute, a + options_.max_step_tokens);
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<int64_t> queries(compute.begin() + a, compute.begin() + b);
    const int64_t last = queries.back();
    // Keys: the tokens up to the step's last query of every segment a query is in, and of its ancestors.
    std::vector<char> wanted(n_seg, 0);
    int64_t state_queries = 0;
    for (auto q : queries) {
      const auto s = segments[q];
      wanted[s] = wanted[packed.segment_parents[s]] = wanted[packed.segment_roots[s]] = 1;
      state_queries += packed.is_root(segments[q]);
    }
    std::vector<int64_t> keys, key_end(queries.size());
    for (size_t s = 0; s < n_seg; ++s)
      if (wanted[s])
        for (int64_t i = seg_start[s]; i < std::min(last + 1, seg_start[s] + lens[s]); ++i) keys.push_back(i);
    std::vector<int64_t> local_rows, out_index;
    for (size_t j = 0, qi = 0; j < keys.size() && qi < queries.size(); ++j)
      if (keys[j] == queries[qi]) key_end[qi++] = static_cast<int64_t>(j) + 1;
    for (size_t qi = 0; qi < queries.size(); ++qi)
      if (out_of_row[queries[qi]] >= 0) {
        local_rows.push_back(static_cast<int64_t>(qi));
        out_index.push_back(out_of_row[queries[qi]]);
      }
    auto q_index = long_tensor(queries), key_index = long_tensor(keys);
    StepBatch step{all_ids.index_select(0, q_index),    all_pos.index_select(0, q_index),  all_seg.index_select(0, q_index),
                   all_parent.index_select(0, q_index), all_root.index_select(0, q_index), all_slots.index_select(0, q_index), key_end,
                   all_slots.index_select(0, key_index), all_pos.index_select(0, key_index), all_seg.index_select(0, key_index),
                   local_rows};
    auto hidden = transformer_->forward(step, *cache_);
    if (!out_index.empty()) out.index_copy_(0, long_tensor(out_index), hidden);
    // A step holding both is attributed by token count.
    const double ms = ms_since(t0), state_share = static_cast<double>(state_queries) / static_cast<double>(queries.size());
    info.state_ms += ms * state_share;
    info.questions_ms += ms * (1 - state_share);
  }

  for (size_t s = 0; s < n_seg; ++s) {
    if (!packed.is_root(s)) continue;
    info.cached_tokens.push_back(seqs[s]->cached_tokens());
    int64_t ticket = -1;
    if (caching) {
      const bool now = options_.boundary == BoundaryRegistration::Before;
      const auto tokens = tokens_of(s);
      cache_->pool().register_prefix(seqs[s]->blocks(), tokens, /*include_partial=*/now);
      if (!now && lens[s] % options_.block_size != 0) {
        // Hold the blocks until the server registers the boundary after its response.
        PendingBoundary p{seqs[s]->blocks(), tokens};
        cache_->pool().retain(p.blocks);
        ticket = next_ticket_++;
        pending_.emplace(ticket, std::move(p));
      }
    }
    info.boundary_tickets.push_back(ticket);
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
