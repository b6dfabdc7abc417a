#include "engine/engine_options.h"

#include "common/errors.h"
#include "kernels/kernel_stack.h"

namespace tq {

at::ScalarType parse_dtype(const std::string& d) {
  if (d == "fp32" || d == "float32") return at::kFloat;
  if (d == "bf16" || d == "bfloat16") return at::kBFloat16;
  throw EngineError(code::kBadRequest, "dtype must be fp32 or bf16, got " + d);
}

// What the options leave to the device, chosen: on CUDA the fast path (the fused row kernels, the cascade,
// CUDA graphs; checked against ATen layer by layer and faster on every workload, docs/gpu.md), ATen's ops
// where the weights are fp8 (the fused kernels take unquantized weights); on the CPU the engine's own kernels.
// The engine's info then names what runs.
EngineOptions resolve_forward_defaults(EngineOptions options, const at::Device& device) {
  const bool cuda = device.is_cuda();
  if (options.kernels.empty() && cuda) options.kernels = options.quantization == "fp8" ? "aten" : "fused";
  if (!options.cuda_graphs) options.cuda_graphs = cuda && options.kernels == "fused";
  return options;
}

// Whether the layers run on ATen's ops (kernels/aten/) rather than the engine's own CPU kernels.
bool uses_aten_kernels(const EngineOptions& options, const at::Device& device) {
  if (!options.kernels.empty() && options.kernels != "engine" && options.kernels != "aten" && options.kernels != "fused")
    throw EngineError(code::kBadRequest, "kernels must be engine, aten or fused, got " + options.kernels);
  if (options.kernels == "engine" && !device.is_cpu())
    throw EngineError(code::kBadRequest, "the engine's own kernels run on the CPU; on " + options.device + " the kernels are aten or fused");
  return options.kernels == "aten" || options.kernels == "fused" || !device.is_cpu();
}

// The engine-wide options, checked before anything is loaded.
void check_engine_options(const EngineOptions& options) {
  if (options.block_size <= 0 || options.max_step_tokens <= 0 || options.context_limit <= 0)
    throw EngineError(code::kBadRequest, "blockSize, maxStepTokens and contextLimit must be positive");
  if (options.register_boundary != "after" && options.register_boundary != "before")
    throw EngineError(code::kBadRequest, "registerBoundary must be after or before, got " + options.register_boundary);
}

// Without batch invariance the CPU matmuls are oneDNN's; where it has no bf16 matmul (CPUs without
// AVX-512), bf16 would fail at the first forward pass, so the engine computes in fp32 and says so in `note`.
at::ScalarType computed_dtype(const EngineOptions& options, at::ScalarType dtype, bool aten, std::string& note) {
  if (aten || options.batch_invariant) return dtype;
#if TQ_ONEDNN
  if (dtype == at::kBFloat16 && !cpu_bf16_without_invariance()) {
    note = "bf16 was asked for, but oneDNN has no bf16 matmul on this CPU (it needs AVX-512): computing in fp32";
    return at::kFloat;
  }
  return dtype;
#else
  throw EngineError(code::kBadRequest, "this build has no oneDNN: on the CPU only the batch-invariant kernels run");
#endif
}

namespace {

// Whether the native arithmetic is asked for, and refused with the reason where it cannot run.
bool check_arithmetic(const EngineOptions& options, at::ScalarType dtype, bool aten, Quantization quantization) {
  if (options.arithmetic == "portable") return false;
  if (options.arithmetic != "native") throw EngineError(code::kBadRequest, "arithmetic must be portable or native, got " + options.arithmetic);
  const auto refuse = [](const std::string& why) { throw EngineError(code::kBadRequest, "arithmetic native: " + why); };
  if (aten || !options.batch_invariant || !options.kernels.empty()) refuse("it is the engine's own invariant CPU kernels' (not aten, oneDNN or fused)");
  if (dtype != at::kBFloat16) refuse("it is bf16's (AMX's bf16 tiles); fp32 has the portable arithmetic only");
  if (quantization != Quantization::None) refuse("int8 is exact on every path, AMX's included: its arithmetic is the portable one");
  if (!native_arithmetic_available()) refuse("this CPU has no AMX-BF16 (Intel Xeon from Sapphire Rapids on, with Linux granting tile state)");
  return true;
}

}  // namespace

// An HF checkpoint's paged model options, checked: the kernels' level, the quantization, the
// attention and the forward they allow together.
PagedModelOptions paged_options(const EngineOptions& options, at::ScalarType dtype, const at::Device& device, bool aten) {
  Isa isa;
  Quantization quantization;
  try {
    isa = isa_for(options.isa);
    quantization = parse_quantization(options.quantization);
    check_buffer_shift(options.buffer_shift);
  } catch (const std::invalid_argument& e) {
    throw EngineError(code::kBadRequest, e.what());
  }
  if (!(options.gpu_memory_utilization >= 0 && options.gpu_memory_utilization <= 1))
    throw EngineError(code::kBadRequest, "gpu_memory_utilization must be in [0, 1] (0: the KV cache sized by the context limit), got " +
                                             std::to_string(options.gpu_memory_utilization));
  if (!options.attention.empty() && options.attention != "kernels" && options.attention != "cascade")
    throw EngineError(code::kBadRequest, "attention must be kernels or cascade, got " + options.attention);
  // The fused forward's attention is the cascade (its GPU form: FlashAttention-2 levels).
  const bool fused = options.kernels == "fused";
  if (fused && options.attention == "kernels") throw EngineError(code::kBadRequest, "the fused kernels attend as a cascade: attention kernels is not theirs");
  if (fused && quantization != Quantization::None) throw EngineError(code::kBadRequest, "the fused kernels run unquantized weights (quantization none)");
  const bool cascade = fused || options.attention == "cascade";
  if (options.buffer_shift != 0 && aten) throw EngineError(code::kBadRequest, "bufferShift is for the engine's own CPU kernels, not aten");
  if (quantization == Quantization::Int8 && aten)
    throw EngineError(code::kBadRequest, "int8 weights run on the engine's CPU kernels only; on CUDA, fp8 is the quantization to ask for");
  if (quantization == Quantization::Fp8 && !device.is_cuda())
    throw EngineError(code::kBadRequest, "fp8 weights run on CUDA only (the H100's fp8 tensor cores); on the CPU use int8");
  const bool native = check_arithmetic(options, dtype, aten, quantization);
  PagedModelOptions o{dtype, options.block_size, options.cache_tokens, options.cache_mib, options.max_step_tokens, options.context_limit,
                       options.prefix_cache, options.batch_invariant, isa, device, aten,
                       options.register_boundary == "before" ? BoundaryRegistration::Before : BoundaryRegistration::After, quantization,
                       options.gpu_memory_utilization, options.buffer_shift, cascade, options.cuda_graphs.value_or(false), fused};
  o.measure_level = options.isa.empty();
  o.native_arithmetic = native;
  return o;
}

}  // namespace tq
