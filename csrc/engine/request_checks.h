// A request's checks before anything is packed or computed (each refusal a BAD_REQUEST naming the request,
// question and token, or a CONTEXT_OVERFLOW with the sizes): its questions, token ids inside the vocabulary,
// labels, temperatures and readout positions, image placeholders where they belong, and every prompt within the
// context, the one place that is checked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace tq {

struct RequestLimits {
  int64_t vocab_size = 0;
  int64_t context_limit = 0;
  int64_t image_pad = -1;  // a vision-language model's image placeholder token; -1: a text model
};

void check_token_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& what);
// A prompt of `tokens` against the context: "<subject> is N tokens, longer than the context of L tokens"; question:
// its index in the request, reported with the sizes (-1: none).
void check_context(int64_t tokens, int64_t context_limit, const std::string& subject, int64_t question = -1);
// state_tokens: the state as the engine computes it (with images, each image's tokens counted); where: the
// request's name in messages ("request 2: "), empty alone.
void check_request(const AnswerRequest& request, int64_t state_tokens, const RequestLimits& limits, const std::string& where);
// A whole sequence whose every position's logits are asked for (Engine::logits_all): not empty, within the context
// and the vocabulary, and its tokens x vocabulary logits within 2^28 (1 GiB), refused rather than failed in the allocator.
void check_whole_sequence(const std::vector<int64_t>& tokens, const RequestLimits& limits);

}  // namespace tq
