// Which instruction set the engine's own CPU kernels run with. Each level runs
// wherever the one above it does, and a lower one can be asked for: the tests
// check every path this CPU can run, and a deployment can pin one.
//   avx512-bf16: AVX-512 with vdpbf16ps (bf16 pairs multiplied and added into
//                fp32; the bf16 GEMM's micro-kernel, gemm_dpbf16.cpp)
//   avx512:      AVX-512 F/BW/VL fp32 FMAs (bf16 widened to fp32)
//   avx2:        AVX2 and FMA
//   generic:     plain x86-64 (SSE2), or any other target ("portable" until 2026-11, still read: the word
//                now names only the arithmetic, docs/arithmetic.md)
#pragma once
#include <optional>
#include <string>

#include "common/choices.h"

namespace tq {

enum class Isa { Generic, Avx2, Avx512, Avx512Bf16 };

template <>
struct ChoiceTable<Isa> {
  static constexpr const char* option = "isa";
  static constexpr NamedValue<Isa> values[] = {{Isa::Avx512Bf16, "avx512-bf16"}, {Isa::Avx512, "avx512"}, {Isa::Avx2, "avx2"}, {Isa::Generic, "generic"}};
  static constexpr NamedValue<Isa> aliases[] = {{Isa::Generic, "portable"}};
};

// The best level this CPU runs, capped by the environment variable
// TQ_KERNELS (a level's name), or by TQ_PORTABLE_KERNELS=1 (the older form).
// Read at each call, so that every engine loaded takes it as it is then.
Isa best_isa();
// The level named (one of the names above), or "" for best_isa(); a level this
// CPU cannot run gives best_isa() instead. Throws std::invalid_argument for a
// name that is none of them.
Isa isa_for(const std::string& name);
// The level asked for where this CPU runs it, else best_isa(); unset: best_isa().
Isa runnable_isa(std::optional<Isa> asked);
const char* isa_name(Isa isa);

}  // namespace tq
