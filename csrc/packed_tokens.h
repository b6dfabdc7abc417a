// A request flattened into one token list: segment 0 is the shared state,
// segment i > 0 is question i. A question's tokens see the state and their own
// earlier tokens only; its positions continue from the end of the state.
#pragma once
#include <cstdint>
#include <vector>

namespace tq {

struct PackedTokens {
  std::vector<int64_t> ids;
  std::vector<int64_t> segment_lengths;  // [state, question 1, question 2, ...]
  std::vector<int64_t> output_rows;      // flat indices whose hidden state is read out
  bool use_prefix_cache = true;          // false when rows of the state itself are read out

  std::vector<int64_t> positions() const {
    std::vector<int64_t> out;
    out.reserve(ids.size());
    for (size_t s = 0; s < segment_lengths.size(); ++s) {
      const int64_t start = s == 0 ? 0 : segment_lengths[0];
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
};

// What a forward pass reports: wall time split the way the server reports it,
// how much of the state came from the prefix cache, and the ticket of a state
// boundary waiting to be registered (-1: none).
struct ForwardInfo {
  double state_ms = 0;
  double questions_ms = 0;
  int64_t cached_tokens = 0;
  int64_t boundary_ticket = -1;
};

}  // namespace tq
