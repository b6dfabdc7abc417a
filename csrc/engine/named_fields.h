// What a caller sets, each field named once, in the addon's spelling: the addon reads load()'s options and each
// request object by these names (addon/js_values.cpp), and tq_cli its flags (the name in kebab-case: blockSize is
// --block-size: cli/flags.cpp) and its calls file (cli/calls_json.cpp). A new option or request field is one line here (docs/build.md,
// "Adding an engine option"). A request's token lists and images, whose forms differ (typed arrays and pixel buffers
// there, JSON lists and raw RGB files here), each reads its own way.
#pragma once

#include "engine/engine.h"
#include "engine/engine_options.h"

namespace tq {

// Calls visit(name, field) for each engine option, in the order a person reads them.
template <class Visit>
void for_each_engine_option(EngineOptions& o, Visit&& visit) {
  visit("path", o.path);
  visit("dtype", o.dtype);
  visit("device", o.device);
  visit("kernels", o.kernels);
  visit("attention", o.attention);
  visit("stateAttention", o.state_attention);
  visit("cudaGraphs", o.cuda_graphs);
  visit("cudaGraphChunks", o.cuda_graph_chunks);
  visit("threads", o.threads);
  visit("isa", o.isa);
  visit("batchInvariant", o.batch_invariant);
  visit("ownGemm", o.own_gemm);
  visit("quantization", o.quantization);
  visit("arithmetic", o.arithmetic);
  visit("blockSize", o.block_size);
  visit("cacheTokens", o.cache_tokens);
  visit("cacheMiB", o.cache_mib);
  visit("gpuMemoryUtilization", o.gpu_memory_utilization);
  visit("prefixCache", o.prefix_cache);
  visit("registerBoundary", o.register_boundary);
  visit("maxStepTokens", o.max_step_tokens);
  visit("contextLimit", o.context_limit);
  visit("visionCacheMiB", o.vision_cache_mib);
  visit("bufferShift", o.buffer_shift);
}

// A request's fields that may be left out, and its questions'.
template <class Visit>
void for_each_request_field(AnswerRequest& r, Visit&& visit) {
  visit("wantHidden", r.want_hidden);
  visit("cacheSalt", r.cache_salt);
}

template <class Visit>
void for_each_question_field(QuestionTokens& q, Visit&& visit) {
  visit("readoutIndex", q.readout_index);
  visit("temperature", q.temperature);
}

}  // namespace tq
