// The row kernels' arithmetic (csrc/kernels/cpu/rows/row_math.h) with the output
// at every distance before and after the input, up to 3 rows apart, and far
// away: a value must not change with where its row's output lies (the
// engine's outputs are scratch rows that the allocator places near or far
// from their inputs). Each row length runs on the clone of this CPU. Prints
// {"kernel", "n", "placements", "differing"} per kernel and length.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/rows/row_math.h"

namespace {

template <class Row>
void check(const char* kernel, int n, Row row) {
  std::mt19937 rng(static_cast<unsigned>(n));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  std::vector<float> far(n);
  row(x.data(), far.data());
  // x in the middle of a buffer, the output at every place that does not overlap it.
  const int margin = 3 * n + 40;
  std::vector<float> buffer(2 * margin + n);
  float* in = buffer.data() + margin;
  int placements = 0, differing = 0;
  for (int offset = -margin; offset <= margin; ++offset) {
    if (offset > -n && offset < n) continue;
    std::memcpy(in, x.data(), n * sizeof(float));
    float* out = in + offset;
    row(in, out);
    ++placements;
    if (std::memcmp(out, far.data(), n * sizeof(float)) != 0) ++differing;
  }
  std::printf("{\"kernel\": \"%s\", \"n\": %d, \"placements\": %d, \"differing\": %d}\n", kernel, n, placements, differing);
}

}  // namespace

int main() {
  for (int n : {16, 32, 64, 80, 96, 128, 256}) {
    std::vector<float> cos(n), sin(n);
    for (int j = 0; j < n; ++j) {
      cos[j] = std::cos(0.37f * static_cast<float>(j));
      sin[j] = std::sin(0.37f * static_cast<float>(j));
    }
    check("rope", n, [&](const float* x, float* y) { tq::rope_row(x, cos.data(), sin.data(), n, y); });
  }
  for (int n : {16, 37, 64, 896}) {
    std::vector<float> w(n, 1.25f);
    check("rms_norm", n, [&](const float* x, float* y) { tq::rms_norm_row(x, w.data(), 1e-6f, n, y); });
  }
}
