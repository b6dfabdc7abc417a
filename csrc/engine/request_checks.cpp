#include "engine/request_checks.h"

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "kernels/math/label_readout_math.h"

namespace tq {

void check_token_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw EngineError(code::kBadRequest, what + " token " + std::to_string(i) + " is " + std::to_string(ids[i]) +
                                               ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

void check_context(int64_t tokens, int64_t context_limit, const std::string& subject, int64_t question) {
  if (tokens <= context_limit) return;
  std::map<std::string, int64_t> details{{"promptTokens", tokens}, {"contextLimit", context_limit}};
  if (question >= 0) details["question"] = question;
  throw EngineError(code::kContextOverflow,
                    subject + " is " + std::to_string(tokens) + " tokens, longer than the context of " + std::to_string(context_limit) + " tokens",
                    details);
}

void check_request(const AnswerRequest& req, int64_t state_len, const RequestLimits& limits, const std::string& where) {
  if (req.questions.empty()) throw EngineError(code::kBadRequest, where + "a request needs at least one question");
  check_token_ids(req.state, limits.vocab_size, where + "state");
  const int64_t pad = limits.image_pad;
  if (pad >= 0 && req.images.empty() && std::count(req.state.begin(), req.state.end(), pad) > 0)
    throw EngineError(code::kBadRequest, where + "the state holds image placeholder tokens but the request has no images");
  for (size_t qi = 0; qi < req.questions.size(); ++qi) {
    const auto& q = req.questions[qi];
    const std::string name = where + "question " + std::to_string(qi);
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (len == 0) throw EngineError(code::kBadRequest, name + " has no tokens");
    check_context(state_len + len, limits.context_limit, "the rendered prompt of " + name, static_cast<int64_t>(qi));
    check_token_ids(q.tokens, limits.vocab_size, name);
    if (pad >= 0 && std::count(q.tokens.begin(), q.tokens.end(), pad) > 0)
      throw EngineError(code::kBadRequest, name + " holds an image placeholder token; images belong in the state");
    if (q.label_ids.empty()) throw EngineError(code::kBadRequest, name + " has no label ids");
    if (static_cast<int64_t>(q.label_ids.size()) > readout::kMaxLabels)
      throw EngineError(code::kBadRequest, name + " has " + std::to_string(q.label_ids.size()) + " labels; at most " + std::to_string(readout::kMaxLabels));
    if (!(q.temperature > 0) || !std::isfinite(q.temperature))
      throw EngineError(code::kBadRequest, name + " temperature must be a positive number");
    check_token_ids(q.label_ids, limits.vocab_size, name + " label");
    const int64_t at = q.readout_at();
    if (at >= len) throw EngineError(code::kBadRequest, name + " readout index " + std::to_string(at) + " is past its " + std::to_string(len) + " tokens");
  }
}

void check_whole_sequence(const std::vector<int64_t>& tokens, const RequestLimits& limits) {
  if (tokens.empty()) throw EngineError(code::kBadRequest, "logitsAll needs at least one token");
  check_context(static_cast<int64_t>(tokens.size()), limits.context_limit, "the sequence");
  check_token_ids(tokens, limits.vocab_size, "sequence");
  if (static_cast<int64_t>(tokens.size()) * limits.vocab_size > (int64_t{1} << 28))
    throw EngineError(code::kBadRequest, "logitsAll of " + std::to_string(tokens.size()) + " tokens x " + std::to_string(limits.vocab_size) +
                                             " vocabulary exceeds 2^28 logits");
}

}  // namespace tq
