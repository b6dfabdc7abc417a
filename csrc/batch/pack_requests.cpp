#include "batch/pack_requests.h"

#include <map>
#include <utility>

#include "batch/shared_prefix.h"

namespace tq {

PackedRequests pack_requests(const std::vector<RequestToPack>& requests, bool multimodal) {
  PackedRequests out;
  out.state_of.resize(requests.size());
  std::map<std::vector<int64_t>, size_t> index;
  for (size_t r = 0; r < requests.size(); ++r) {
    auto [it, fresh] = index.emplace(multimodal ? requests[r].image_state->hash_ids : *requests[r].state, out.first_with_state.size());
    if (fresh) out.first_with_state.push_back(r);
    out.state_of[r] = it->second;
  }
  PackedTokens& packed = out.tokens;
  packed.multimodal = multimodal;
  std::vector<std::vector<int64_t>> rows(requests.size());  // per request, its questions' readout rows
  int64_t embed_rows = 0;
  for (size_t k = 0; k < out.first_with_state.size(); ++k) {
    const RequestToPack& first = requests[out.first_with_state[k]];
    int64_t root;
    if (multimodal) {
      root = packed.add_image_state(*first.image_state, embed_rows);
      for (const auto& span : first.image_state->spans) embed_rows += span.tokens;
    } else {
      root = packed.add_segment(*first.state, -1);
    }
    // The state's questions from every request, with text they begin with in common packed once.
    std::vector<std::pair<size_t, size_t>> owner;  // (request, question)
    std::vector<const std::vector<int64_t>*> tokens;
    std::vector<int64_t> readout_at;
    for (size_t r = 0; r < requests.size(); ++r) {
      if (out.state_of[r] != k) continue;
      rows[r].resize(requests[r].questions.size());
      for (size_t qi = 0; qi < requests[r].questions.size(); ++qi) {
        owner.emplace_back(r, qi);
        tokens.push_back(requests[r].questions[qi]);
        readout_at.push_back(requests[r].readout_at[qi]);
      }
    }
    for (const auto& run : plan_shared_prefixes(tokens, readout_at)) {
      const auto& lead = *tokens[run.members.front()];
      const int64_t parent =
          run.shared_tokens > 0 ? packed.add_segment(std::vector<int64_t>(lead.begin(), lead.begin() + run.shared_tokens), root) : root;
      for (size_t m : run.members) {
        rows[owner[m].first][owner[m].second] = static_cast<int64_t>(packed.ids.size()) + readout_at[m] - run.shared_tokens;
        packed.add_segment(std::vector<int64_t>(tokens[m]->begin() + run.shared_tokens, tokens[m]->end()), parent);
      }
    }
  }
  for (const auto& rr : rows) packed.output_rows.insert(packed.output_rows.end(), rr.begin(), rr.end());
  return out;
}

}  // namespace tq
