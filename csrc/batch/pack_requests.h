// One engine call's requests packed into one token list (packed_tokens.h):
// each distinct state once (with images: the same ids and the same images),
// followed by the questions of every request that asks about it, with the text
// several of them begin with packed once (shared_prefix.h). This is the engine's
// half of batching; the server merges the requests that queue while the engine
// is busy into one call (docs/architecture.md, "The two halves of batching").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "batch/image_state.h"
#include "batch/packed_tokens.h"

namespace tq {

// A request as it is packed: its state, and its questions' tokens with their readout indices.
struct RequestToPack {
  const std::vector<int64_t>* state = nullptr;  // the state's token ids; multimodal: unused
  const ImagePrompt* image_state = nullptr;     // multimodal: the state expanded around its images
  std::vector<const std::vector<int64_t>*> questions;
  std::vector<int64_t> readout_at;  // per question: the index of its readout token in its tokens
  std::string salt;                 // the request's cache salt: requests share a state only under the same salt
};

struct PackedRequests {
  // output_rows: every request's questions, in request then question order.
  PackedTokens tokens;
  std::vector<size_t> first_with_state;  // per packed state (packing order): the first request that has it
  std::vector<size_t> state_of;          // per request: its (first question's) state's place in packing order
};

// multimodal: states are keyed and packed by their image prompts (their hash ids carry the images'
// keys); the caller sets tokens.image_embeds. A state's image tokens take the rows of image_embeds
// in packing order. long_rope_after: a longrope model's original context (0: none); a state is
// packed once more, marked long_rope, for its questions whose sequence is longer (packed_tokens.h).
PackedRequests pack_requests(const std::vector<RequestToPack>& requests, bool multimodal, int64_t long_rope_after = 0);

}  // namespace tq
