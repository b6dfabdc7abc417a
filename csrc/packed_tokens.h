// Requests flattened into one token list of segments. A state is a root
// segment; each question is a segment whose root is its state, placed after
// it. A question's tokens see their state and their own earlier tokens only,
// with positions continuing from the end of the state. Several states (a
// batch of requests) may share one list: nothing crosses between them.
#pragma once
#include <cstdint>
#include <vector>

namespace tq {

struct PackedTokens {
  std::vector<int64_t> ids;
  std::vector<int64_t> segment_lengths;
  std::vector<int64_t> segment_roots;  // per segment: the index of its state's segment (a state: itself)
  std::vector<int64_t> output_rows;    // flat indices whose hidden state is read out
  bool use_prefix_cache = true;        // false when rows of the state itself are read out

  bool is_root(size_t s) const { return segment_roots[s] == static_cast<int64_t>(s); }

  // Appends a segment; `root` is -1 for a new state.
  void add_segment(const std::vector<int64_t>& tokens, int64_t root) {
    const int64_t s = static_cast<int64_t>(segment_lengths.size());
    ids.insert(ids.end(), tokens.begin(), tokens.end());
    segment_lengths.push_back(static_cast<int64_t>(tokens.size()));
    segment_roots.push_back(root < 0 ? s : root);
  }

  std::vector<int64_t> positions() const {
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s) {
      const int64_t start = is_root(s) ? 0 : segment_lengths[segment_roots[s]];
      for (int64_t i = 0; i < segment_lengths[s]; ++i) out.push_back(start + i);
    }
    return out;
  }
  std::vector<int64_t> segments() const {
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s) out.insert(out.end(), segment_lengths[s], static_cast<int64_t>(s));
    return out;
  }
  std::vector<int64_t> roots() const {
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s) out.insert(out.end(), segment_lengths[s], segment_roots[s]);
    return out;
  }
};

// What a forward pass reports: wall time split the way the server reports it,
// and per state (in order of their root segments) how many of its tokens came
// from the prefix cache and the ticket of its boundary awaiting registration (-1: none).
struct ForwardInfo {
  double state_ms = 0;
  double questions_ms = 0;
  int64_t computed_tokens = 0;  // tokens the forward pass computed (the whole call)
  std::vector<int64_t> cached_tokens;
  std::vector<int64_t> boundary_tickets;
};

}  // namespace tq
