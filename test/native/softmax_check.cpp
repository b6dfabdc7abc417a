// The softmax numerators (csrc/kernels/cpu/softmax.cpp) of one row of scores
// placed at 40 offsets behind masked keys (-inf), on the portable loops and
// on AVX-512 where the CPU has it: an element's numerator must not depend on
// its place in the row. Prints {"path", "offsets", "differing"} per path.
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/softmax.h"

namespace {

void check(const char* path, bool avx512) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int n = 37, offsets = 40;
  std::vector<float> scores(n);
  for (float& v : scores) v = normal(rng);
  std::vector<float> first;
  int differing = 0;
  for (int offset = 0; offset < offsets; ++offset) {
    std::vector<float> row(offset + n + 5, -std::numeric_limits<float>::infinity());
    std::memcpy(row.data() + offset, scores.data(), n * sizeof(float));
    std::vector<uint16_t> bf16(row.size());
    tq::softmax_numerators(row.data(), static_cast<int64_t>(row.size()), nullptr, 0, bf16.data(), avx512);
    std::vector<float> got(row.begin() + offset, row.begin() + offset + n);
    if (first.empty()) first = got;
    else if (std::memcmp(first.data(), got.data(), n * sizeof(float)) != 0) ++differing;
  }
  std::printf("{\"path\": \"%s\", \"offsets\": %d, \"differing\": %d}\n", path, offsets, differing);
}

}  // namespace

int main() {
  check("portable", false);
  if (tq::best_isa() >= tq::Isa::Avx512) check("avx512", true);
}
