// The CPU kernels' level chosen by measurement (docs/engine.md, "Which level
// runs"). What runs fastest is not what the CPU's flags rank highest: on an
// Intel Xeon with AVX-512 BF16, vdpbf16ps runs at half the FMA rate and the
// bf16 GEMM is faster at level avx512 (bf16 widened, fp32 FMAs) than at
// avx512-bf16; on an AMD Zen 5 the order is the other way. So at load the
// engine times the model's own GEMMs (its linear layers' shapes, in its dtype
// and quantization) at every exact level the CPU runs and takes the fastest.
//
// Each level is exact on its own (answers bit-identical in any batch), but two
// levels may differ in the last bits: every engine of one model on one machine
// must take the same level. So a choice is measured once and kept in a small
// file (TQ_LEVEL_CACHE, else $XDG_CACHE_HOME/tqserve/kernel-levels, else
// ~/.cache/tqserve/kernel-levels), keyed by the CPU's model, the dtype, the
// quantization, the threads and the shapes; the file is locked while a process
// measures, so processes started together (and the node-gyp and cmake-js builds
// of the addon) agree. Not by build: delete the file to measure again after an
// upgrade. A level is forced, as before, by --isa or TQ_KERNELS (a cap): then
// nothing is measured.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/quantization.h"

namespace tq {

struct LevelRate {
  Isa level;
  double gflops;  // the model's GEMMs at that level, on the engine's threads
};

struct LevelChoice {
  Isa level = Isa::Portable;
  std::string how;  // "measured", "cached" (measured before, by this process or another), "forced" (--isa, TQ_KERNELS) or "only" (one level runs)
  std::vector<LevelRate> rates;  // fastest first; empty unless measured or cached
};

// The linear layers' shapes of a model: [out, in] each.
struct GemmShape {
  int64_t out, in;
};

// Measures (or reads) the fastest of the levels this CPU runs, up to best_isa(), for GEMMs of these shapes.
LevelChoice choose_level(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization);

}  // namespace tq
