// The engine's answering: a batch of requests checked, packed into one segment forest, its forward pass and
// readout queued (launch_batch), and, once the device has done them, each request's answers (finish_batch).
#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/errors.h"
#include "engine/engine.h"
#include "engine/host_allocator.h"
#include "engine/launched_batch.h"
#include "engine/request_checks.h"

namespace tq {

std::vector<AnswerResult> Engine::answer_batch(const std::vector<AnswerRequest>& reqs) { return finish_batch(*launch_batch(reqs)); }

std::unique_ptr<LaunchedBatch> Engine::launch_batch(std::vector<AnswerRequest> reqs) {
  if (reqs.empty()) throw EngineError(code::kBadRequest, "a batch needs at least one request");
  auto launched = std::make_unique<LaunchedBatch>();
  auto& b = *launched;
  b.requests = std::move(reqs);
  // A call with images is multimodal throughout (batch/packed_tokens.h): its states are expanded around their images.
  b.multimodal = std::any_of(b.requests.begin(), b.requests.end(), [](const AnswerRequest& r) { return !r.images.empty(); });
  if (b.multimodal) require_vision("the request");
  const auto packing = std::chrono::steady_clock::now();
  b.prompts = checked_prompts(b.requests, b.multimodal);
  b.packed = pack(b.requests, b.prompts, b.multimodal);
  const double pack_ms = ms_since(packing);
  b.forward = model_->final_hidden(b.packed.tokens);  // on CUDA, queued: the device may still run its steps
  b.forward.info.plan_ms += pack_ms;
  const auto t0 = std::chrono::steady_clock::now();
  // Every question's labels in one readout (on CUDA, one launch), in output-row order.
  std::vector<ReadoutQuestion> questions;
  for (const auto& req : b.requests)
    for (const auto& q : req.questions) questions.push_back({q.label_ids, q.temperature});
  b.readout = queue_readout(b.forward.hidden, model_->lm_head(), questions, model_->final_logit_softcap());
  if (std::any_of(b.requests.begin(), b.requests.end(), [](const AnswerRequest& r) { return r.want_hidden; }))
    b.hidden_host = queue_copy_to_host(b.forward.hidden);
  b.done = std::make_unique<DeviceMark>(device_);
  b.readout_queue_ms = ms_since(t0);
  return launched;
}

std::vector<AnswerResult> Engine::finish_batch(LaunchedBatch& b) {
  b.forward.wait_for_steps();
  b.done->wait();  // this call's readout and copies back, not the next call's work queued since
  const auto& info = b.forward.info;
  const auto t0 = std::chrono::steady_clock::now();
  auto results = answers_of(b, b.readout.wait());
  const double readout_ms = b.readout_queue_ms + ms_since(t0);
  release_free_host_memory();
  for (auto& res : results) {
    res.state_ms = info.state_ms;
    res.questions_ms = info.questions_ms;
    res.readout_ms = readout_ms;
    res.plan_ms = info.plan_ms;
    res.graph_launch_ms = info.graph_launch_ms;
    res.graph_launches = info.graph_launches;
    res.computed_tokens = info.computed_tokens;
    res.padding_tokens = info.padding_tokens;
    res.graph_replays = info.graph_replays;
  }
  return results;
}

// Each request checked (an error names the request when there are several); in a multimodal
// call, its state expanded around its images first, since the expanded state is what must fit.
std::vector<ImagePrompt> Engine::checked_prompts(const std::vector<AnswerRequest>& reqs, bool multimodal) const {
  std::vector<ImagePrompt> prompts(reqs.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    const std::string where = reqs.size() > 1 ? "request " + std::to_string(r) + ": " : "";
    if (multimodal) {
      try {
        prompts[r] = image_prompt(reqs[r].state, reqs[r].images);
      } catch (const EngineError& e) {
        throw EngineError(e.code(), where + e.what(), e.details());
      }
    }
    check_request(reqs[r], static_cast<int64_t>(multimodal ? prompts[r].ids.size() : reqs[r].state.size()), request_limits(), where);
  }
  return prompts;
}

// The requests as one segment forest (batch/pack_requests.h): each state once, then its questions.
PackedRequests Engine::pack(const std::vector<AnswerRequest>& reqs, const std::vector<ImagePrompt>& prompts, bool multimodal) {
  std::vector<RequestToPack> to_pack(reqs.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    to_pack[r].state = &reqs[r].state;
    to_pack[r].image_state = &prompts[r];
    to_pack[r].salt = reqs[r].cache_salt;
    for (const auto& q : reqs[r].questions) {
      to_pack[r].questions.push_back(&q.tokens);
      to_pack[r].readout_at.push_back(q.readout_at());
    }
  }
  auto batch = pack_requests(to_pack, multimodal, model_->long_rope_after());
  // Every state's images, in packing order: made during the forward pass, only if some image token is computed.
  batch.tokens.image_embeds = [this, &reqs, first = batch.first_with_state] {
    std::vector<at::Tensor> embeds;
    for (auto r : first)
      if (!reqs[r].images.empty()) embeds.push_back(image_embeddings(reqs[r].images));
    return at::cat(embeds);
  };
  return batch;
}

// Each request's result: its questions' labels (and hidden states, if asked) in output-row order,
// its prefix cache counts, and its state's boundary ticket (given to the first request of that state).
std::vector<AnswerResult> Engine::answers_of(const LaunchedBatch& b, const LabelReadout& labels) const {
  const auto& reqs = b.requests;
  const auto& info = b.forward.info;
  const auto hidden_cpu = b.hidden_host.defined() ? b.hidden_host.contiguous() : at::Tensor();
  std::vector<AnswerResult> results(reqs.size());
  std::vector<char> ticket_given(info.boundary_tickets.size(), 0);
  int64_t row = 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    AnswerResult& res = results[r];
    res.state_tokens = static_cast<int64_t>(b.multimodal ? b.prompts[r].ids.size() : reqs[r].state.size());
    const size_t k = b.packed.state_of[r];  // ForwardInfo lists states in packing order
    res.cached_tokens = info.cached_tokens.at(k);
    if (!ticket_given[k]) {
      res.boundary_ticket = info.boundary_tickets.at(k);
      ticket_given[k] = 1;
    }
    for (const auto& q : reqs[r].questions) {
      res.question_tokens += static_cast<int64_t>(q.tokens.size());
      const auto from = labels.offsets[row], to = labels.offsets[row + 1];
      QuestionAnswer a;
      a.label_logits.assign(labels.logits.begin() + from, labels.logits.begin() + to);
      a.label_log_probs.assign(labels.log_probs.begin() + from, labels.log_probs.begin() + to);
      if (reqs[r].want_hidden) {
        const float* h = hidden_cpu.data_ptr<float>() + row * hidden_cpu.size(1);
        a.hidden.assign(h, h + hidden_cpu.size(1));
      }
      ++row;
      res.answers.push_back(std::move(a));
    }
  }
  return results;
}

}  // namespace tq
