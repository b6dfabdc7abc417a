// The engine options a caller sets, each named once, in load()'s spelling: the addon reads each from its options
// object by this name (addon/js_values.cpp), and tq_cli from the flag of the same name in kebab-case (blockSize:
// --block-size; cli/main.cpp). A new option is one line here (docs/build.md, "Adding an engine option").
#pragma once

#include "engine/engine_options.h"

namespace tq {

// Calls visit(name, field) for each option, in the order a person reads them.
template <class Visit>
void for_each_engine_option(EngineOptions& o, Visit&& visit) {
  visit("path", o.path);
  visit("dtype", o.dtype);
  visit("device", o.device);
  visit("kernels", o.kernels);
  visit("attention", o.attention);
  visit("cudaGraphs", o.cuda_graphs);
  visit("threads", o.threads);
  visit("isa", o.isa);
  visit("batchInvariant", o.batch_invariant);
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

}  // namespace tq
