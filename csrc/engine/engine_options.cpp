#include "engine/engine_options.h"

#include "runner/paged_model.h"
#include "runner/step_graphs.h"

namespace tq {

// What the options leave to the device, chosen: on CUDA the fast path (the fused row kernels, the cascade,
// CUDA graphs; checked against ATen layer by layer and faster on every workload, docs/gpu.md), ATen's ops
// where the weights are fp8 (the fused kernels take unquantized weights); on the CPU the engine's own kernels.
// The engine's info then names what runs.
EngineOptions resolve_forward_defaults(EngineOptions options, const at::Device& device) {
  const bool cuda = device.is_cuda();
  if (!options.kernels && cuda) options.kernels = options.quantization == Quantization::Fp8 ? ForwardKernels::Aten : ForwardKernels::Fused;
  if (!options.cuda_graphs) options.cuda_graphs = cuda && options.kernels == ForwardKernels::Fused;
  return options;
}

// Whether the layers run on ATen's ops (kernels/aten/) rather than the engine's own CPU kernels.
bool uses_aten_kernels(const EngineOptions& options, const at::Device& device) {
  if (options.kernels == ForwardKernels::Engine && !device.is_cpu())
    throw EngineError(code::kBadRequest, "the engine's own kernels run on the CPU; on " + options.device + " the kernels are aten or fused");
  return options.kernels == ForwardKernels::Aten || options.kernels == ForwardKernels::Fused || !device.is_cpu();
}

// The engine-wide options, checked before anything is loaded.
void check_engine_options(const EngineOptions& options) {
  if (options.block_size <= 0 || options.max_step_tokens <= 0 || options.context_limit <= 0)
    throw EngineError(code::kBadRequest, "blockSize, maxStepTokens and contextLimit must be positive");
  if (options.cuda_graph_chunks < 1 || options.cuda_graph_chunks > StepGraphs::kMaxChunks)
    throw EngineError(code::kBadRequest, "cudaGraphChunks must be 1 to " + std::to_string(StepGraphs::kMaxChunks));
}

void check_torchscript_options(const EngineOptions& options, const at::Device& device, bool aten) {
  if (!device.is_cpu() || aten) throw EngineError(code::kBadRequest, "TorchScript models run on the CPU with libtorch's kernels only");
  if (options.quantization != Quantization::None) throw EngineError(code::kBadRequest, "TorchScript models run with their weights as stored: quantization must be none");
  if (options.arithmetic != Arithmetic::Portable) throw EngineError(code::kBadRequest, "TorchScript models run libtorch's kernels: arithmetic must be portable");
  if (options.attention == AttentionForm::Cascade) throw EngineError(code::kBadRequest, "TorchScript models run their own attention: attention cascade needs an HF checkpoint");
}

// Without batch invariance the CPU matmuls are oneDNN's; where it has no bf16 matmul (CPUs without
// AVX-512), bf16 would fail at the first forward pass, so the engine computes in fp32 and says so in `note`.
at::ScalarType computed_dtype(const EngineOptions& options, bool aten, std::string& note) {
  if (aten || options.batch_invariant) return options.dtype;
#if TQ_ONEDNN
  if (options.dtype == at::kBFloat16 && !cpu_bf16_without_invariance()) {
    note = "bf16 was asked for, but oneDNN has no bf16 matmul on this CPU (it needs AVX-512): computing in fp32";
    return at::kFloat;
  }
  return options.dtype;
#else
  throw EngineError(code::kBadRequest, "this build has no oneDNN: on the CPU only the batch-invariant kernels run");
#endif
}

namespace {

// Whether the native arithmetic is asked for, and refused with the reason where it cannot run.
bool check_arithmetic(const EngineOptions& options, at::ScalarType dtype, bool aten) {
  if (options.arithmetic == Arithmetic::Portable) return false;
  const auto refuse = [](const std::string& why) { throw EngineError(code::kBadRequest, "arithmetic native: " + why); };
  if (aten || !options.batch_invariant) refuse("it is the engine's own invariant CPU kernels' (not aten, oneDNN or fused)");
  if (dtype != at::kBFloat16) refuse("it is bf16's (AMX's bf16 tiles); fp32 has the portable arithmetic only");
  if (options.quantization != Quantization::None) refuse("int8 is exact on every path, AMX's included: its arithmetic is the portable one");
  if (!native_arithmetic_available()) refuse("this CPU has no AMX-BF16 (Intel Xeon from Sapphire Rapids on, with Linux granting tile state)");
  return true;
}

// The forward's kernels, attention and quantization, refused where they do not go together.
void check_forward(const EngineOptions& options, const at::Device& device, bool aten) {
  const bool fused = options.kernels == ForwardKernels::Fused;
  // The fused forward's attention is the cascade (its GPU form: FlashAttention-2 tiers).
  if (fused && options.attention == AttentionForm::Direct)
    throw EngineError(code::kBadRequest, "the fused kernels attend as a cascade: attention direct is not theirs");
  if (options.state_attention != StateAttention::Varlen && !fused && options.attention != AttentionForm::Cascade)
    throw EngineError(code::kBadRequest, "stateAttention chooses the cascade's state tier: split-key needs attention cascade (or the fused kernels)");
  if (fused && options.quantization != Quantization::None)
    throw EngineError(code::kBadRequest, "the fused kernels run unquantized weights (quantization none)");
  if (options.buffer_shift != 0 && aten) throw EngineError(code::kBadRequest, "bufferShift is for the engine's own CPU kernels, not aten");
  if (options.quantization == Quantization::Int8 && aten)
    throw EngineError(code::kBadRequest, "int8 weights run on the engine's CPU kernels only; on CUDA, fp8 is the quantization to ask for");
  if (options.quantization == Quantization::Fp8 && !device.is_cuda())
    throw EngineError(code::kBadRequest, "fp8 weights run on CUDA only (the H100's fp8 tensor cores); on the CPU use int8");
  if (options.own_gemm && !(device.is_cuda() && aten && options.batch_invariant && options.dtype == at::kBFloat16 && options.quantization == Quantization::None))
    throw EngineError(code::kBadRequest, "ownGemm is a form of the batch-invariant CUDA engine's bf16 GEMMs on few rows: it needs a CUDA device, the "
                                         "aten or fused kernels, batchInvariant on, dtype bf16 and quantization none");
}

}  // namespace

// An HF checkpoint's paged model options, checked: the kernels' level, the quantization, the
// attention and the forward they allow together.
PagedModelOptions paged_options(const EngineOptions& options, at::ScalarType dtype, const at::Device& device, bool aten) {
  Isa isa;
  try {
    isa = runnable_isa(options.isa);
    check_buffer_shift(options.buffer_shift);
  } catch (const std::invalid_argument& e) {
    throw EngineError(code::kBadRequest, e.what());
  }
  if (!(options.gpu_memory_utilization >= 0 && options.gpu_memory_utilization <= 1))
    throw EngineError(code::kBadRequest, "gpu_memory_utilization must be in [0, 1] (0: the KV cache sized by the context limit), got " +
                                             std::to_string(options.gpu_memory_utilization));
  check_forward(options, device, aten);
  const bool fused = options.kernels == ForwardKernels::Fused;
  PagedModelOptions o;
  o.kernels.device = device;
  o.kernels.dtype = dtype;
  o.kernels.quantization = options.quantization;
  o.kernels.aten = aten;
  o.kernels.batch_invariant = options.batch_invariant;
  o.kernels.own_gemm = options.own_gemm;
  o.kernels.isa = isa;
  o.kernels.native_arithmetic = check_arithmetic(options, dtype, aten);
  o.kernels.buffer_shift = options.buffer_shift;
  o.kernels.fused_rows = fused;
  o.kernels.cascade_attention = fused || options.attention == AttentionForm::Cascade;
  o.kernels.state_attention = options.state_attention;
  o.kernels.fixed_shapes = options.cuda_graphs.value_or(false);
  // A step runs through graphs only where it has a fixed launch shape: padded, with the cascade planned in its fixed form.
  if (options.cuda_graph_chunks > 1 && !(o.kernels.fixed_shapes && o.kernels.cascade_attention))
    throw EngineError(code::kBadRequest, "cudaGraphChunks above 1 cuts a step's CUDA graphs: it needs cudaGraphs on and the cascade attention");
  o.graph_chunks = options.cuda_graph_chunks;
  o.block_size = options.block_size;
  o.cache_tokens = options.cache_tokens;
  o.cache_mib = options.cache_mib;
  o.max_step_tokens = options.max_step_tokens;
  o.context_limit = options.context_limit;
  o.prefix_cache = options.prefix_cache;
  o.boundary = options.register_boundary;
  o.gpu_memory_utilization = options.gpu_memory_utilization;
  o.measure_level = !options.isa;
  return o;
}

}  // namespace tq
