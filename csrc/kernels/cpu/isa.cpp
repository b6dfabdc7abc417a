#include "kernels/cpu/isa.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace tq {
namespace {

Isa cpu_best() {
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return Isa::Avx512Bf16;
  if (avx512) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Generic;
}

}  // namespace

const char* isa_name(Isa isa) { return choice_name(isa); }

Isa best_isa() {
  Isa best = cpu_best(), cap = Isa::Avx512Bf16;
  if (const char* env = std::getenv("TQ_KERNELS"); env && *env) try {
      cap = parse_choice<Isa>(env);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("TQ_KERNELS: ") + e.what());
    }
  if (const char* env = std::getenv("TQ_PORTABLE_KERNELS"); env && *env && std::string(env) != "0") cap = Isa::Generic;
  return std::min(best, cap);
}

Isa isa_for(const std::string& name) { return name.empty() ? best_isa() : runnable_isa(parse_choice<Isa>(name)); }

Isa runnable_isa(std::optional<Isa> asked) { return asked ? std::min(*asked, best_isa()) : best_isa(); }

}  // namespace tq
