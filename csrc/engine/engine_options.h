// The engine's options, checked before anything is loaded (csrc/engine/engine.h's EngineOptions): what the
// device leaves to choose, the dtype that computes, the kernels, the arithmetic, and the paged model's options
// they allow together. Each refusal names the option and why.
#pragma once
#include <ATen/ATen.h>

#include <string>

#include "engine/engine.h"
#include "engine/paged_model.h"

namespace tq {

at::ScalarType parse_dtype(const std::string& d);
// What the options leave to the device, chosen (the fast path on CUDA; the engine's own kernels on the CPU).
EngineOptions resolve_forward_defaults(EngineOptions options, const at::Device& device);
// Whether the layers run on ATen's ops (kernels/aten/) rather than the engine's own CPU kernels.
bool uses_aten_kernels(const EngineOptions& options, const at::Device& device);
// The engine-wide options, checked before anything is loaded.
void check_engine_options(const EngineOptions& options);
// The dtype that computes: `dtype`, or fp32 where oneDNN has no bf16 matmul (said in `note`).
at::ScalarType computed_dtype(const EngineOptions& options, at::ScalarType dtype, bool aten, std::string& note);
// An HF checkpoint's paged model options, checked: the kernels' level, the quantization, the attention, the
// forward and the arithmetic they allow together.
PagedModelOptions paged_options(const EngineOptions& options, at::ScalarType dtype, const at::Device& device, bool aten);

}  // namespace tq
