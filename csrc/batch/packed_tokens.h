// Requests flattened into one token list of segments, a forest of depth at
// most three: a state is a root segment; a question's parent is its state, or
// a shared segment (text several questions of the state begin with) whose
// parent is the state. A segment's tokens see their ancestors and their own
// earlier tokens only, with positions continuing from the end of the parent.
// Several states (a batch of requests) may share one list: nothing crosses
// between them. A parent is always packed before its children.
//
// With longrope (Phi-3), a sequence longer than the model's original context
// takes RoPE's long factors for all its tokens, as transformers does: the
// sequences of a state that are longer are packed under a root of their own,
// marked `long_rope`, whose keys the prefix cache hashes apart.
//
// A call about images (the image engine) is `multimodal`: then every token
// also has M-RoPE's three positions (a segment's text continues one past its
// parent's largest position), the value the prefix cache hashes in its place
// (an image's tokens carry the image's key), and, for image tokens, a row of
// image_embeds that stands in for its token embedding (batch/image_state.h).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "batch/image_state.h"

namespace tq {

struct PackedTokens {
  std::vector<int64_t> ids;
  std::vector<int64_t> segment_lengths;
  std::vector<int64_t> segment_roots;    // per segment: the index of its state's segment (a state: itself)
  std::vector<int64_t> segment_parents;  // per segment: its parent segment (a state: itself)
  std::vector<int64_t> segment_long_rope;  // per segment: 1 when its sequences take longrope's long factors (its state's mark)
  std::vector<std::string> state_salts;    // per segment: a state's cache salt (cache/block_pool.h; empty: none), set by the packer
  std::vector<int64_t> output_rows;    // flat indices whose hidden state is read out
  bool use_prefix_cache = true;        // false when rows of the state itself are read out

  bool multimodal = false;              // set before the first segment is added
  std::vector<int64_t> rope_positions;  // multimodal: [ids.size(), 3] t, h, w
  std::vector<int64_t> hash_ids;        // multimodal: what the prefix cache hashes for each token
  std::vector<int64_t> embed_rows;      // multimodal: each token's row of image_embeds, or -1
  // multimodal: makes the rows embed_rows point at, [image tokens, hidden] fp32 on the engine's device.
  // Called only when some image token is computed: an image whose tokens all come from the prefix
  // cache needs no vision tower.
  std::function<at::Tensor()> image_embeds;
  std::vector<int64_t> segment_next_position;  // multimodal: one past each segment's largest position

  bool is_root(size_t s) const { return segment_roots[s] == static_cast<int64_t>(s); }

  // Appends a segment and returns its index; `parent` is -1 for a new state, marked `long_rope` or not.
  int64_t add_segment(const std::vector<int64_t>& tokens, int64_t parent, bool long_rope = false) {
    const int64_t s = push_segment(tokens, parent, long_rope);
    if (multimodal) {
      const int64_t start = parent < 0 ? 0 : segment_next_position[parent], n = static_cast<int64_t>(tokens.size());
      for (int64_t i = 0; i < n; ++i) rope_positions.insert(rope_positions.end(), 3, start + i);
      hash_ids.insert(hash_ids.end(), tokens.begin(), tokens.end());
      embed_rows.insert(embed_rows.end(), n, -1);
      segment_next_position.push_back(start + n);
    }
    return s;
  }

  // Appends a state with images (multimodal); its image tokens take rows first_embed_row, ... of image_embeds.
  int64_t add_image_state(const ImagePrompt& p, int64_t first_embed_row) {
    const size_t first = ids.size();
    const int64_t s = push_segment(p.ids, -1, false);
    rope_positions.insert(rope_positions.end(), p.rope_positions.begin(), p.rope_positions.end());
    hash_ids.insert(hash_ids.end(), p.hash_ids.begin(), p.hash_ids.end());
    embed_rows.insert(embed_rows.end(), p.ids.size(), -1);
    for (const auto& span : p.spans)
      for (int64_t i = 0; i < span.tokens; ++i) embed_rows[first + span.offset + i] = first_embed_row++;
    segment_next_position.push_back(p.next_position);
    return s;
  }

  // Index into ids of each segment's first token.
  std::vector<int64_t> segment_offsets() const {
    std::vector<int64_t> offset(segment_lengths.size(), 0);
    for (size_t s = 1; s < segment_lengths.size(); ++s) offset[s] = offset[s - 1] + segment_lengths[s - 1];
    return offset;
  }
  // What the prefix cache hashes for a segment: its token ids, or hash_ids when multimodal; a
  // long_rope state's ids with a bit no token id has, as its keys and values differ.
  std::vector<int64_t> segment_cache_keys(size_t s, const std::vector<int64_t>& offsets) const {
    const auto& from = multimodal ? hash_ids : ids;
    std::vector<int64_t> keys(from.begin() + offsets[s], from.begin() + offsets[s] + segment_lengths[s]);
    if (segment_long_rope[s])
      for (auto& k : keys) k |= int64_t{1} << 62;
    return keys;
  }
  bool any_long_rope() const {
    for (auto l : segment_long_rope)
      if (l) return true;
    return false;
  }

  // Position of each segment's first token: the end of its parent's.
  std::vector<int64_t> segment_starts() const {
    std::vector<int64_t> start(segment_lengths.size(), 0);
    for (size_t s = 0; s < segment_lengths.size(); ++s) {
      const int64_t p = segment_parents[s];
      if (p != static_cast<int64_t>(s)) start[s] = start[p] + segment_lengths[p];
    }
    return start;
  }
  std::vector<int64_t> positions() const {
    const auto start = segment_starts();
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s)
      for (int64_t i = 0; i < segment_lengths[s]; ++i) out.push_back(start[s] + i);
    return out;
  }
  std::vector<int64_t> segments() const {
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s) out.insert(out.end(), segment_lengths[s], static_cast<int64_t>(s));
    return out;
  }
  std::vector<int64_t> roots() const { return per_token(segment_roots); }
  std::vector<int64_t> long_rope() const { return per_token(segment_long_rope); }
  std::vector<int64_t> parents() const { return per_token(segment_parents); }

 private:
  int64_t push_segment(const std::vector<int64_t>& tokens, int64_t parent, bool long_rope) {
    const int64_t s = static_cast<int64_t>(segment_lengths.size());
    ids.insert(ids.end(), tokens.begin(), tokens.end());
    segment_lengths.push_back(static_cast<int64_t>(tokens.size()));
    segment_roots.push_back(parent < 0 ? s : segment_roots[parent]);
    segment_parents.push_back(parent < 0 ? s : parent);
    segment_long_rope.push_back(parent < 0 ? long_rope : segment_long_rope[parent]);
    state_salts.emplace_back();
    return s;
  }
  std::vector<int64_t> per_token(const std::vector<int64_t>& per_segment) const {
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s) out.insert(out.end(), segment_lengths[s], per_segment[s]);
    return out;
  }
};

// What a forward pass reports: wall time split the way the server reports it,
// and per state (in order of their root segments) how many of its tokens came
// from the prefix cache and the ticket of its boundary awaiting registration (-1: none).
struct ForwardInfo {
  double state_ms = 0;
  double questions_ms = 0;
  // The host's planning of the steps, apart from their forward passes: the prefix looked up, the steps planned and
  // padded, their attention planned and their arrays moved to the device (a CUDA graph's buffers refilled). On
  // CUDA a lone call's first step waits for it; with calls in flight it overlaps the call before.
  double plan_ms = 0;
  // The host's time in launching the steps' CUDA graphs (runner/step_graphs.h), apart from plan_ms: a graph's first
  // kernel waits for its launch. 0 without graphs.
  double graph_launch_ms = 0;
  int64_t graph_launches = 0;  // the CUDA graphs its steps launched (on the CPU, those a GPU would launch)
  int64_t computed_tokens = 0;  // tokens the forward pass computed (the whole call)
  int64_t padding_tokens = 0;   // padding tokens it also computed, in bucketed steps (batch/step_buckets.h)
  int64_t graph_replays = 0;    // steps that replayed a CUDA graph an earlier step captured (runner/step_graphs.h)
  std::vector<int64_t> cached_tokens;
  std::vector<int64_t> boundary_tickets;
};

// A forward pass's result: the final (normed) hidden states of the packed call's output rows, [rows, hidden] fp32
// on the model's device, and what it reports.
struct ForwardResult {
  at::Tensor hidden;
  ForwardInfo info;
  // Set while the steps may still be running (CUDA's work is queued, and the caller may queue more behind
  // it): waits for them and fills info's state_ms and questions_ms. wait_for_steps() calls it once.
  std::function<void(ForwardInfo&)> read_step_times{};
  void wait_for_steps() {
    if (!read_step_times) return;
    read_step_times(info);
    read_step_times = nullptr;
  }
};

}  // namespace tq
