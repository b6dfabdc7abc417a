#include "batch/pack_requests.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "batch/shared_prefix.h"

namespace tq {

namespace {

// Phase 1's result: the packed states (their first request, whether longrope's long factors) and each question's.
struct StateAssignment {
  std::vector<bool> long_rope;                        // per packed state
  std::vector<std::vector<size_t>> state_of_question;  // per request, per question: its packed state
};

// Phase 1: each question's packed state: its request's state under its cache salt, as a long_rope one when the
// state and the question together are longer than long_rope_after (0: never), as transformers picks longrope's
// factors. Fills out.first_with_state and out.state_of.
StateAssignment assign_states(const std::vector<RequestToPack>& requests, bool multimodal, int64_t long_rope_after, PackedRequests& out) {
  StateAssignment a;
  a.state_of_question.resize(requests.size());
  out.state_of.resize(requests.size());
  std::map<std::tuple<std::string, std::vector<int64_t>, bool>, size_t> index;
  for (size_t r = 0; r < requests.size(); ++r) {
    const auto& req = requests[r];
    const auto& key = multimodal ? req.image_state->hash_ids : *req.state;
    auto state_for = [&](bool is_long) {
      auto [it, fresh] = index.emplace(std::make_tuple(req.salt, key, is_long), out.first_with_state.size());
      if (fresh) {
        out.first_with_state.push_back(r);
        a.long_rope.push_back(is_long);
      }
      return it->second;
    };
    for (size_t qi = 0; qi < req.questions.size(); ++qi) {
      const bool is_long = long_rope_after > 0 && !multimodal && static_cast<int64_t>(req.state->size() + req.questions[qi]->size()) > long_rope_after;
      a.state_of_question[r].push_back(state_for(is_long));
    }
    // A request's state for what is reported per state (cached tokens, its boundary): its first question's.
    out.state_of[r] = a.state_of_question[r].empty() ? state_for(false) : a.state_of_question[r][0];
  }
  return a;
}

// Phase 2, for one packed state k: its questions from every request, the text they begin with in common packed
// once under the state (root), each question's readout row recorded in rows.
void pack_questions(const std::vector<RequestToPack>& requests, const StateAssignment& a, size_t k, int64_t root, PackedTokens& packed,
                    std::vector<std::vector<int64_t>>& rows) {
  std::vector<std::pair<size_t, size_t>> owner;  // (request, question)
  std::vector<const std::vector<int64_t>*> tokens;
  std::vector<int64_t> readout_at;
  for (size_t r = 0; r < requests.size(); ++r)
    for (size_t qi = 0; qi < requests[r].questions.size(); ++qi) {
      if (a.state_of_question[r][qi] != k) continue;
      owner.emplace_back(r, qi);
      tokens.push_back(requests[r].questions[qi]);
      readout_at.push_back(requests[r].readout_at[qi]);
    }
  for (const auto& run : plan_shared_prefixes(tokens, readout_at, packed.segment_lengths[static_cast<size_t>(root)])) {
    const auto& lead = *tokens[run.members.front()];
    const int64_t parent =
        run.shared_tokens > 0 ? packed.add_segment(std::vector<int64_t>(lead.begin(), lead.begin() + run.shared_tokens), root) : root;
    for (size_t m : run.members) {
      rows[owner[m].first][owner[m].second] = static_cast<int64_t>(packed.ids.size()) + readout_at[m] - run.shared_tokens;
      packed.add_segment(std::vector<int64_t>(tokens[m]->begin() + run.shared_tokens, tokens[m]->end()), parent);
    }
  }
}

}  // namespace

PackedRequests pack_requests(const std::vector<RequestToPack>& requests, bool multimodal, int64_t long_rope_after) {
  PackedRequests out;
  const auto states = assign_states(requests, multimodal, long_rope_after, out);
  PackedTokens& packed = out.tokens;
  packed.multimodal = multimodal;
  std::vector<std::vector<int64_t>> rows(requests.size());  // per request, its questions' readout rows
  for (size_t r = 0; r < requests.size(); ++r) rows[r].resize(requests[r].questions.size());
  int64_t embed_rows = 0;
  for (size_t k = 0; k < out.first_with_state.size(); ++k) {
    const RequestToPack& first = requests[out.first_with_state[k]];
    int64_t root;
    if (multimodal) {
      root = packed.add_image_state(*first.image_state, embed_rows);
      for (const auto& span : first.image_state->spans) embed_rows += span.tokens;
    } else {
      root = packed.add_segment(*first.state, -1, states.long_rope[k]);
    }
    packed.state_salts[static_cast<size_t>(root)] = first.salt;
    pack_questions(requests, states, k, root, packed, rows);
  }
  for (const auto& rr : rows) packed.output_rows.insert(packed.output_rows.end(), rr.begin(), rr.end());
  return out;
}

}  // namespace tq
