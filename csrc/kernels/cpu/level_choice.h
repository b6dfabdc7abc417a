// The CPU kernels' level chosen by measurement (docs/engine.md, "Which level
// runs"). What runs fastest is not what the CPU's flags rank highest: on an
// Intel Xeon with AVX-512 BF16, vdpbf16ps runs at half the FMA rate and the
// bf16 GEMM is faster at level avx512 (bf16 widened, fp32 FMAs) than at
// avx512-bf16; on an AMD Zen 5 the order is the other way. So at load the
// engine times the model's own GEMMs (its linear layers' shapes, in its dtype
// and quantization) at every level the CPU runs and takes the fastest.
//
// Every level computes the same bits (docs/arithmetic.md): the level is a
// matter of speed alone, and an engine may change it at any time. So the
// measurement is made to be trusted, and made again when it is not:
//   - the levels take turns over several rounds, and each level's rate is the
//     median of its rounds, so that a busy moment hits every level alike
//     (three rounds when one level's median beats every other's fastest by
//     a quarter: more could not change the choice);
//   - a measurement during which other processes took CPU time the engine's
//     threads needed (/proc/stat, steal included) is marked busy: used for
//     now, not kept in the file but beside it (<file>.busy) for a minute, in
//     which the next engines of the same key, in any process, take it, each
//     saying busy, rather than each measuring on a machine just as busy
//     (engine processes started together; a test suite's many);
//   - the engine measures again after start (remeasure_level, when it is
//     idle: server/engine-process/host.ts) and switches if the fastest level
//     has changed.
// A trusted measurement is kept in a small file (TQ_LEVEL_CACHE, else
// $XDG_CACHE_HOME/tqserve/kernel-levels, else ~/.cache/tqserve/kernel-levels),
// keyed by the CPU's model, the dtype, the quantization, the threads and the
// shapes, so that a start need not measure; a later measurement replaces it.
// --isa or TQ_KERNELS (a cap) force a level: then nothing is measured.
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
  Isa level = Isa::Generic;
  // "measured" (at load), "cached" (measured before, by this process or another), "re-measured" (after load),
  // "forced" (--isa, TQ_KERNELS) or "only" (one level runs)
  std::string how;
  bool busy = false;  // measured while the machine was busy: used for now, not kept, to be measured again
  std::vector<LevelRate> rates;  // fastest first; empty unless measured or cached
  int rounds = 0;     // the rounds measured now (fewer than the most where one level led decisively); 0 if not measured now
  bool measurable() const { return how != "forced" && how != "only" && !how.empty(); }
};

// The linear layers' shapes of a model: [out, in] each.
struct GemmShape {
  int64_t out, in;
};

// Measures (or reads) the fastest of the levels this CPU runs, up to best_isa(), for GEMMs of these shapes.
LevelChoice choose_level(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization);
// Measures again, whatever the file holds; a trusted result replaces the file's. how: "re-measured".
LevelChoice remeasure_level(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization);

}  // namespace tq
