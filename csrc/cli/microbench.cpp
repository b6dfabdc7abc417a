#include "cli/microbench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/cpu_layer_kernels.h"
#include "runner/device.h"
#include "engine/readout.h"

namespace tq {
namespace {

// Sorted wall times of `iterations` calls after one warm-up.
template <typename F>
std::vector<double> times_ms(int iterations, F&& f) {
  f();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < std::max(1, iterations); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times;
}

template <typename F>
double median_ms(int iterations, F&& f) {
  auto t = times_ms(iterations, f);
  return t[t.size() / 2];
}

}  // namespace

GemmRate measure_gemm(int64_t m, int64_t k, int64_t n, at::ScalarType dtype, int iterations, bool invariant, Isa isa, bool int8, bool native) {
  auto a = at::randn({m, k}).to(dtype), w = (at::randn({n, k}) * 0.02).to(dtype);
  // As the engine runs its linear layers.
  std::unique_ptr<Linear> linear = cpu_layer_kernels(invariant, isa, dtype, int8 ? Quantization::Int8 : Quantization::None, native)->linear(w, {});
  GemmRate r;
  // The fastest run: this measures the machine's limit, which neighbours on a
  // shared machine can only lower.
  r.ms = times_ms(iterations, [&] { (*linear)(a, dtype); }).front();
  r.gflops = 2.0 * m * k * n / (r.ms * 1e6);
  return r;
}

ReadoutTiming measure_readout(const at::Tensor& lm_head, int64_t labels, int iterations) {
  auto hidden = at::randn({1, lm_head.size(1)}).to(lm_head.device());
  auto ids = at::randperm(lm_head.size(0), at::TensorOptions().dtype(at::kLong)).slice(0, 0, labels);
  const std::vector<ReadoutQuestion> question{{std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + labels), 1.0f}};
  ReadoutTiming t;
  t.readout_ms = median_ms(iterations, [&] { read_labels(hidden, lm_head, question); });  // returns on the host
  t.full_ms = median_ms(iterations, [&] {
    full_logits(hidden, lm_head);
    synchronize(lm_head.device());
  });
  return t;
}

}  // namespace tq
