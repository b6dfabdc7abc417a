#include "engine/engine_info_json.h"

namespace tq {
namespace {

nlohmann::ordered_json device_json(const DeviceInfo& d) {
  nlohmann::ordered_json j{{"mode", d.mode}, {"name", d.name}, {"totalBytes", d.total_bytes}, {"freeBytes", d.free_bytes}};
  if (!d.capability.empty()) j["capability"] = d.capability;
  if (!d.cuda_version.empty()) j["cudaVersion"] = d.cuda_version;
  j["torchVersion"] = d.torch_version;
  return j;
}

// How the CPU kernels' level was chosen, over how many rounds, and each level's measured rate (GFLOP/s), fastest first.
nlohmann::ordered_json level_choice_json(const EngineInfo& i) {
  nlohmann::ordered_json rates = nlohmann::ordered_json::object();
  for (const auto& [level, gflops] : i.level_rates) rates[level] = gflops;
  return {{"how", i.level_choice}, {"busy", i.level_busy}, {"rounds", i.level_rounds}, {"gflops", rates}};
}

nlohmann::ordered_json vision_json(const VisionConfig& v, const ImageTokens& t) {
  return {{"depth", v.depth},         {"embedDim", v.embed_dim},
          {"heads", v.num_heads},     {"mlpRatio", v.mlp_ratio},
          {"intermediateSize", v.intermediate_size}, {"windowSize", v.window_size},
          {"patchSize", v.patch_size}, {"temporalPatchSize", v.temporal_patch_size},
          {"mergeSize", v.spatial_merge_size}, {"outHidden", v.out_hidden},
          {"visionStartId", t.vision_start}, {"visionEndId", t.vision_end},
          {"imagePadId", t.image_pad}};
}

}  // namespace

nlohmann::ordered_json engine_info_json(const EngineInfo& i) {
  nlohmann::ordered_json r{{"format", i.format}, {"architecture", i.architecture}, {"dtype", i.dtype}, {"storedDtype", i.stored_dtype}};
  if (!i.dtype_note.empty()) r["dtypeNote"] = i.dtype_note;
  r["vocabSize"] = i.vocab_size;
  r["hiddenSize"] = i.hidden_size;
  r["contextLimit"] = i.context_limit;
  r["blockSize"] = i.block_size;
  r["cacheBlocks"] = i.cache_blocks;
  r["cacheBytes"] = i.cache_bytes;
  if (!i.cache_sized_by.empty()) r["cacheSizedBy"] = i.cache_sized_by;
  r["gpuMemoryUtilization"] = i.gpu_memory_utilization;
  r["threads"] = i.threads;
  r["kernels"] = i.kernels;
  if (!i.level_choice.empty()) r["levelChoice"] = level_choice_json(i);
  r["attention"] = i.attention;
  if (!i.state_attention.empty()) r["stateAttention"] = i.state_attention;
  r["cudaGraphs"] = i.cuda_graphs;
  r["cudaGraphChunks"] = i.cuda_graph_chunks;
  r["quantization"] = i.quantization;
  r["arithmetic"] = i.arithmetic;
  if (!i.quantized_kernels.empty()) r["quantizedKernels"] = i.quantized_kernels;
  r["weightsMs"] = i.weights_ms;
  r["linearBytes"] = i.linear_bytes;
  r["prefixCache"] = i.prefix_cache;
  r["batchInvariant"] = i.batch_invariant;
  r["ownGemm"] = i.own_gemm;
  r["registerBoundary"] = i.register_boundary;
  r["device"] = device_json(i.device);
  if (i.parameters > 0) {
    r["parameters"] = i.parameters;
    r["activeParameters"] = i.active_parameters;
  }
  if (i.moe)
    r["moe"] = {{"experts", i.moe->num_experts},
                {"expertsPerToken", i.moe->top_k},
                {"expertIntermediateSize", i.moe->expert_intermediate},
                {"sharedExpertIntermediateSize", i.moe->shared_intermediate}};
  if (i.vision) r["vision"] = vision_json(*i.vision, i.image_tokens);
  return r;
}

}  // namespace tq
