#include "kernels/cpu/isa.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace tq {
namespace {

constexpr Isa kLevels[] = {Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16};

Isa cpu_best() {
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return Isa::Avx512Bf16;
  if (avx512) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Portable;
}

bool named(const std::string& name, Isa* out) {
  for (Isa level : kLevels)
    if (name == isa_name(level)) {
      *out = level;
      return true;
    }
  return false;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512Bf16:
      return "avx512-bf16";
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "portable";
  }
}

Isa best_isa() {
  Isa best = cpu_best(), cap = Isa::Avx512Bf16;
  if (const char* env = std::getenv("TQ_KERNELS"); env && *env && !named(env, &cap))
    throw std::invalid_argument(std::string("TQ_KERNELS must be avx512-bf16, avx512, avx2 or portable, got ") + env);
  if (const char* env = std::getenv("TQ_PORTABLE_KERNELS"); env && *env && std::string(env) != "0") cap = Isa::Portable;
  return std::min(best, cap);
}

Isa isa_for(const std::string& name) {
  if (name.empty()) return best_isa();
  Isa asked;
  if (!named(name, &asked)) throw std::invalid_argument("isa must be avx512-bf16, avx512, avx2 or portable, got " + name);
  return std::min(asked, best_isa());
}

}  // namespace tq
