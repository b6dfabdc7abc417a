// Prints, for random rows and hidden states, the label readout's dot products as
// kernels/math/label_readout_math.h computes them, in hex. Built twice by
// test/kernels/cuda.test.ts, at -O0 and at -O3 with FMA instructions allowed:
// the two must agree bit for bit, or the host compiler fused a multiply-add that
// the CUDA kernel rounds twice.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/math/label_readout_math.h"

int main() {
  // Inputs from integer arithmetic only (a library distribution's own float math could be fused differently).
  uint32_t state = 7;
  auto uniform = [&] {
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    return static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / static_cast<float>(1 << 23);  // exact, in [-1, 1)
  };
  for (int n : {1, 31, 32, 33, 896, 4096}) {
    std::vector<float> row(n), hidden(n);
    for (int i = 0; i < n; ++i) row[i] = uniform(), hidden[i] = uniform();
    float partial[tq::readout::kLanes];
    for (int lane = 0; lane < tq::readout::kLanes; ++lane) partial[lane] = tq::readout::lane_partial(row.data(), hidden.data(), n, lane);
    const float dot = tq::readout::combine_lanes(partial);
    float logits[3] = {dot, -dot, 0.5f * dot}, out[3];
    tq::readout::log_probs(logits, 3, 1.3f, out);
    std::printf("%d %a %a %a %a\n", n, dot, out[0], out[1], out[2]);
  }
  return 0;
}
