// The softmax numerators (csrc/kernels/cpu/rows/softmax.cpp) of one row of scores
// placed at 40 offsets behind masked keys (-inf), with masked keys between
// them too, on the generic loops and on each AVX-512 level the CPU has: an
// element's numerator (fp32 in place, and bf16) and the row's inverse sum
// must not depend on its place in the row, nor on the level (each level's
// against the generic loops'); the inverse sum must be within 1e-7 of 1 / a
// float64 sum of the same numerators. The row is long enough to cross the
// AVX-512 loops' groups of 8 vectors and their single vectors after them at
// every offset. Prints {"path", "offsets", "differing", "differingFromGeneric",
// "sumError"} per path.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/rows/softmax.h"

namespace {

struct Numerators {
  std::vector<float> fp32;
  std::vector<uint16_t> bf16;
  float inverse = 0;
  bool operator==(const Numerators& o) const {
    return std::memcmp(fp32.data(), o.fp32.data(), fp32.size() * sizeof(float)) == 0 && bf16 == o.bf16 && inverse == o.inverse;
  }
};
std::vector<Numerators> generic;  // the generic loops' at each offset

void check(const char* path, tq::Isa isa) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int n = 301, offsets = 40;
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  std::vector<float> scores(n);
  for (float& v : scores) v = normal(rng);
  for (int i = 5; i < n; i += 7) scores[i] = kMasked;  // masked keys among the visible ones
  std::vector<Numerators> at(offsets);
  int differing = 0, differing_from_generic = 0;
  double sum_error = 0;
  for (int offset = 0; offset < offsets; ++offset) {
    std::vector<float> row(offset + n + 5, kMasked);
    std::memcpy(row.data() + offset, scores.data(), n * sizeof(float));
    std::vector<float> fp32 = row;
    const float inverse = tq::softmax_numerators(fp32.data(), static_cast<int64_t>(fp32.size()), 0.5f, nullptr, 0, nullptr, isa);
    std::vector<uint16_t> bf16(row.size());
    const float inverse_bf16 = tq::softmax_numerators(row.data(), static_cast<int64_t>(row.size()), 0.5f, nullptr, 0, bf16.data(), isa);
    at[offset] = {std::vector<float>(fp32.begin() + offset, fp32.begin() + offset + n),
                  std::vector<uint16_t>(bf16.begin() + offset, bf16.begin() + offset + n), inverse};
    double sum = 0;
    for (float v : fp32) sum += v;
    sum_error = std::max(sum_error, std::abs(inverse * sum - 1.0));
    if (offset > 0 && !(at[offset] == at[0])) ++differing;
    if (inverse_bf16 != inverse) ++differing;
    if (!generic.empty() && !(at[offset] == generic[offset])) ++differing_from_generic;
  }
  if (generic.empty()) generic = at;
  std::printf("{\"path\": \"%s\", \"offsets\": %d, \"differing\": %d, \"differingFromGeneric\": %d, \"sumError\": %g}\n", path, offsets, differing,
              differing_from_generic, sum_error);
}

}  // namespace

int main() {
  check("generic", tq::Isa::Generic);
  if (tq::best_isa() >= tq::Isa::Avx512) check("avx512", tq::Isa::Avx512);
  if (tq::best_isa() >= tq::Isa::Avx512Bf16) check("avx512-bf16", tq::Isa::Avx512Bf16);
}
