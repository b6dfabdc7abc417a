// The engine's options, one typed config (EngineOptions), and their checks before anything is loaded: what
// the device leaves to choose, the dtype that computes, the kernels, the arithmetic, and the paged model's
// options they allow together. Each choice is an enum read by its name through its ChoiceTable
// (common/choices.h), so a name of none of them is refused where it is read, with the choices listed; each
// refusal of a combination names the option and why. Adding an option: docs/build.md.
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "common/choices.h"
#include "common/errors.h"
#include "kernels/kernel_stack.h"
#include "runner/boundary_registration.h"

namespace tq {

struct PagedModelOptions;  // runner/paged_model.h

// Whose ops run the layers: the engine's own CPU kernels (CPU only), ATen's device-generic ops (on the CPU a
// check of that path), or the fused row kernels and the cascade over ATen's GEMMs (the GPU's fast path).
enum class ForwardKernels { Engine, Aten, Fused };
// How attention is computed: direct, each query over all the keys it sees in one softmax, by the layer kernels
// (the CPU kernels' chunked plan, ATen's masked SDPA); or as a cascade (tiers merged by log-sum-exp,
// kernels/cascade/: the GPU's form; on the CPU over a plain fp32 reference, for checking it).
enum class AttentionForm { Direct, Cascade };
// portable: the same bits on every x86 CPU; native: bf16 on AMX tiles, faster, bits of AMX machines alone
// (docs/arithmetic.md).
enum class Arithmetic { Portable, Native };

template <>
struct ChoiceTable<at::ScalarType> {
  static constexpr const char* option = "dtype";
  static constexpr NamedValue<at::ScalarType> values[] = {{at::kFloat, "fp32"}, {at::kBFloat16, "bf16"}};
};
template <>
struct ChoiceTable<ForwardKernels> {
  static constexpr const char* option = "kernels";
  static constexpr NamedValue<ForwardKernels> values[] = {
      {ForwardKernels::Engine, "engine"}, {ForwardKernels::Aten, "aten"}, {ForwardKernels::Fused, "fused"}};
};
template <>
struct ChoiceTable<AttentionForm> {
  static constexpr const char* option = "attention";
  static constexpr NamedValue<AttentionForm> values[] = {{AttentionForm::Direct, "direct"}, {AttentionForm::Cascade, "cascade"}};
  static constexpr NamedValue<AttentionForm> aliases[] = {{AttentionForm::Direct, "kernels"}};  // its name until 2026-11
};
template <>
struct ChoiceTable<Arithmetic> {
  static constexpr const char* option = "arithmetic";
  static constexpr NamedValue<Arithmetic> values[] = {{Arithmetic::Portable, "portable"}, {Arithmetic::Native, "native"}};
};

// A choice option read by name (the addon's load(), tq_cli's flags); a name of none of its values is a bad request.
template <class E>
E parse_option(const std::string& name) {
  try {
    return parse_choice<E>(name);
  } catch (const std::invalid_argument& e) {
    throw EngineError(code::kBadRequest, e.what());
  }
}

struct EngineOptions {
  std::string path;  // HF checkpoint folder, or a TorchScript .pt file
  at::ScalarType dtype = at::kFloat;
  int threads = 0;  // 0 = leave torch's default
  int64_t block_size = 16;
  int64_t cache_tokens = 0;  // 0 = twice the context limit
  int64_t cache_mib = 0;     // KV budget in MiB; overrides cache_tokens when set
  // On CUDA with neither of those set: the KV cache's share of the device memory the weights leave
  // free, in (0, 1] (the server's --gpu-memory-utilization, 0.9); 0: twice the context limit.
  double gpu_memory_utilization = 0;
  bool prefix_cache = true;
  // Kernels whose result for a row does not depend on the rest of the batch (the
  // engine's own GEMM and attention), or oneDNN's (faster where it has bf16 instructions).
  bool batch_invariant = true;
  // On CUDA, batch-invariant, bf16: our own few-row GEMM's tilings (kernels/cuda/few_rows_mma.h) among the forms a GEMM
  // of at most 256 rows is measured in, taken where fastest and keeping a cold state's bits (kernels/aten/few_rows_gemm.h).
  // Off until a GPU has run it (docs/gpu.md, "The GEMM on few rows").
  bool own_gemm = false;
  // The highest instruction set level the engine's own CPU kernels may use (kernels/cpu/isa.h); a level the
  // CPU lacks gives the best it has. Unset: the level measured fastest, up to the best this CPU has, capped
  // by TQ_KERNELS (kernels/cpu/level_choice.h).
  std::optional<Isa> isa;
  std::string device = "cpu";  // cpu | cuda | cuda:N (runner/device.h)
  // Unset: by device (resolve_forward_defaults): the engine's kernels on the CPU, fused on CUDA (aten with fp8
  // weights, which the fused kernels do not take).
  std::optional<ForwardKernels> kernels;
  std::optional<AttentionForm> attention;  // unset: cascade with the fused kernels, the kernels' own otherwise
  // The cascade's state tier: varlen (the kernel of the other tiers) or split-key (read in place); the cascade's only.
  StateAttention state_attention = StateAttention::Varlen;
  // Steps of up to 4,096 tokens padded to fixed shapes (batch/step_buckets.h): on CUDA for CUDA graphs; on the CPU
  // the padded steps run eagerly, to check that padding changes no answer. Unset: on with the fused
  // forward on CUDA (the GPU's default), off elsewhere.
  std::optional<bool> cuda_graphs;
  // The CUDA graphs a fixed-shape step is cut into, between layers, at most (runner/step_graphs.h): the first small, so
  // that the device starts on it while the host launches the rest. 1: one graph a step. Above 1 with CUDA graphs and
  // the cascade only (on the CPU: the cuts recorded and checked with the step's launches).
  int64_t cuda_graph_chunks = 1;
  BoundaryRegistration register_boundary = BoundaryRegistration::After;
  Quantization quantization = Quantization::None;  // of the linear layers (kernels/quantization.h)
  Arithmetic arithmetic = Arithmetic::Portable;
  int64_t max_step_tokens = 2048;
  int64_t context_limit = 32768;
  int64_t vision_cache_mib = 256;  // the vision tower's outputs kept by image key (a vision-language model)
  // A test instrument: the CPU kernels read their operands this many bytes past a 64-byte
  // boundary (kernels/shifted_layer_kernels.h); 0 for serving.
  int64_t buffer_shift = 0;
};

// What the options leave to the device, chosen (the fast path on CUDA; the engine's own kernels on the CPU).
EngineOptions resolve_forward_defaults(EngineOptions options, const at::Device& device);
// Whether the layers run on ATen's ops (kernels/aten/) rather than the engine's own CPU kernels.
bool uses_aten_kernels(const EngineOptions& options, const at::Device& device);
// The engine-wide options, checked before anything is loaded.
void check_engine_options(const EngineOptions& options);
// A TorchScript export's: it runs whole on the CPU with libtorch's kernels and its weights as stored.
void check_torchscript_options(const EngineOptions& options, const at::Device& device, bool aten);
// The dtype that computes: `dtype`, or fp32 where oneDNN has no bf16 matmul (said in `note`).
at::ScalarType computed_dtype(const EngineOptions& options, bool aten, std::string& note);
// An HF checkpoint's paged model options, checked: the kernels' level, the quantization, the attention, the
// forward and the arithmetic they allow together.
PagedModelOptions paged_options(const EngineOptions& options, at::ScalarType dtype, const at::Device& device, bool aten);

}  // namespace tq
