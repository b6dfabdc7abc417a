// The layer kernels the engine runs, built in one place from its choices, and what the engine may ask of
// the kernels besides (the CPU kernels' levels, memory and abilities). The engine includes kernels/
// through this header alone (the readout's own kernel aside): which implementation runs, and what wraps
// it, is decided here.
//
// The stack, from the bottom: the engine's own CPU kernels (kernels/cpu/, shifted for the alignment
// checks) or ATen's ops (kernels/aten/, any device); the fused row kernels over ATen's GEMMs
// (kernels/fused/); attention as a cascade (kernels/cascade/) on top.
#pragma once
#include <ATen/ATen.h>

#include <memory>

#include "kernels/cascade/cascade_layer_kernels.h"
#include "kernels/cpu/cpu_layer_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/level_choice.h"
#include "kernels/layer_kernels.h"
#include "kernels/quantization.h"
#include "kernels/shifted_layer_kernels.h"

namespace tq {

struct KernelStackOptions {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  Quantization quantization = Quantization::None;  // of the linear layers
  bool aten = false;             // ATen's ops rather than the engine's CPU kernels (any device)
  bool batch_invariant = true;   // the engine's CPU kernels: the invariant GEMM, or oneDNN's; ATen's on CUDA: cuBLAS without split-K
  bool own_gemm = false;         // ... and on few rows our kernel among cuBLAS's forms (kernels/aten/few_rows_gemm.h)
  Isa isa = Isa::Generic;       // ... at this level
  bool native_arithmetic = false;  // ... bf16 linear layers on AMX tiles (docs/arithmetic.md)
  int64_t buffer_shift = 0;      // ... operands read this many bytes off alignment (a test instrument)
  bool fused_rows = false;       // the fused row kernels over ATen's GEMMs (aten set too)
  bool cascade_attention = false;
  StateAttention state_attention = StateAttention::Varlen;  // the cascade's state tier
  bool fixed_shapes = false;     // steps of up to 4,096 tokens padded to fixed shapes (batch/step_buckets.h); the cascade plans them in the fixed form (CUDA graphs)
};

std::unique_ptr<LayerKernels> make_layer_kernels(const KernelStackOptions& options);

}  // namespace tq
