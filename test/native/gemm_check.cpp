// The invariant GEMM's families (csrc/kernels/cpu/gemm/gemm_kernels.h) checked
// without torch, at every level this CPU runs, in fp32 and bf16:
//   - accuracy: every output against a float64 reference of the same
//     (bf16-rounded) inputs, as a ratio to the bound K * 2^-23 * sum |x w|
//     (fp32 accumulation; bf16 products are exact);
//   - invariance: each row's outputs bit-identical when computed alone, in
//     batches of other sizes at other places (crossing row tiles and blocks),
//     with its columns split between "threads" differently, and when
//     accumulated onto its bias rather than started from it;
//   - bf16 outputs: every one the fp32 output rounded to nearest even;
//   - the outputs' bits as a hash: every level computes the same chains
//     (docs/arithmetic.md), so all must agree bit for bit, the vdpbf16ps
//     family with the FMA one in bf16, and the generic level as a CPU
//     without FMA runs it ("generic-libm") with the rest.
// Each at an odd K (the vdpbf16ps family packs its steps, the last pair half
// empty) and an even one (it reads them in place).
// Prints one JSON line per (level, dtype); test/kernels/cpu.test.ts reads them.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "dpbf16_model.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm/gemm_kernels.h"

using namespace tq;

namespace {

float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  gemm::Kernel kernel;
  bool bf16;
  int64_t k, n;
  std::vector<float> xf, wf;      // values as the kernel sees them (bf16-rounded in bf16)
  std::vector<uint16_t> xb, wb;
  std::vector<char> packed;
  std::vector<float> bias;

  Case(gemm::Kernel kn, bool is_bf16, int64_t m, int64_t kk, int64_t nn, uint32_t seed) : kernel(kn), bf16(is_bf16), k(kk), n(nn) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto fill = [&](std::vector<float>& f, std::vector<uint16_t>& b, int64_t count, float scale) {
      for (int64_t i = 0; i < count; ++i) {
        float v = normal(rng) * scale;
        if (bf16) {
          b.push_back(bf16_of(v));
          v = from_bf16(b.back());
        }
        f.push_back(v);
      }
    };
    fill(xf, xb, m * k, 1.0f);
    fill(wf, wb, n * k, 0.05f);
    packed.resize(kernel.packed_bytes(n, k));
    const auto w_rows = gemm::rows_every(bf16 ? static_cast<const void*>(wb.data()) : wf.data(), n, k * (bf16 ? 2 : 4));
    kernel.pack(gemm::PackSource{w_rows.data(), true}, n, k, packed.data());
    bias.assign(static_cast<size_t>(kernel.panels(n) * kernel.width), 0.0f);
    for (int64_t j = 0; j < n; ++j) bias[j] = normal(rng);
  }
  const void* rows(int64_t first) const {
    return bf16 ? static_cast<const void*>(xb.data() + first * k) : static_cast<const void*>(xf.data() + first * k);
  }
  // Rows [first, first + m) into out (m x n, fp32 or bf16), the panels split at `split`, with the bias or not.
  template <typename T = float>
  std::vector<T> run(int64_t first, int64_t m, int64_t split, bool with_bias) const {
    std::vector<T> out(static_cast<size_t>(m * n));
    const gemm::GemmOperands job{rows(first), packed.data(), out.data(), with_bias ? bias.data() : nullptr, m, k, n, k, n, false, sizeof(T) == 2};
    const int64_t panels = kernel.panels(n), at = std::min(split, panels);
    kernel.run(job, 0, at);
    kernel.run(job, at, panels);
    return out;
  }
  void accumulate(int64_t first, int64_t m, std::vector<float>& out) const {
    const gemm::GemmOperands job{rows(first), packed.data(), out.data(), nullptr, m, k, n, k, n, true};
    kernel.run(job, 0, kernel.panels(n));
  }
};

// alone_every: every row alone, or (the slow model of AMX tiles) every so many.
void check(const char* level, const gemm::Kernel& kernel, bool bf16, int64_t k, int64_t alone_every = 1) {
  // K past the longest k block (2,048), so chains cross a block boundary
  // (except bf16 outputs, which take K in one block); N = 150: a partial last panel.
  const int64_t m = 111, n = 150;
  const Case c(kernel, bf16, m, k, n, bf16 ? 7 : 3);
  const std::vector<float> all = c.run(0, m, 1, true);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = c.bias[j], magnitude = std::fabs(c.bias[j]);
      for (int64_t kk = 0; kk < k; ++kk) {
        exact += static_cast<double>(c.xf[i * k + kk]) * c.wf[j * k + kk];
        magnitude += std::fabs(static_cast<double>(c.xf[i * k + kk]) * c.wf[j * k + kk]);
      }
      worst = std::max(worst, std::fabs(all[i * n + j] - exact) / (k * std::ldexp(1.0, -23) * magnitude));
    }
  // Every row alone, and in sub-batches of other sizes at other places, with other column splits.
  int64_t mismatches = 0, compared = 0;
  const auto compare = [&](const std::vector<float>& got, int64_t first, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r, ++compared)
      if (std::memcmp(got.data() + r * n, all.data() + (first + r) * n, n * sizeof(float)) != 0) ++mismatches;
  };
  for (int64_t i = 0; i < m; i += alone_every) compare(c.run(i, 1, 0, true), i, 1);
  const int64_t batches[][2] = {{0, 7}, {5, 49}, {3, 100}, {60, 51}, {1, 110}};
  for (const auto& b : batches)
    for (int64_t split : {0, 1, 2})
      compare(c.run(b[0], b[1], split, true), b[0], b[1]);
  // Accumulating onto the bias rows gives the same chains as starting from the bias.
  std::vector<float> from_bias(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) std::memcpy(from_bias.data() + i * n, c.bias.data(), n * sizeof(float));
  c.accumulate(0, m, from_bias);
  compare(from_bias, 0, m);
  // bf16 outputs, rounded as each tile completes, against the fp32 ones rounded after.
  int64_t bf16_differing = 0;
  const std::vector<uint16_t> narrow = c.run<uint16_t>(0, m, 1, true);
  for (size_t i = 0; i < all.size(); ++i) bf16_differing += narrow[i] != bf16_of(all[i]);
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the output bytes
  for (size_t b = 0; b < all.size() * sizeof(float); ++b) hash = (hash ^ reinterpret_cast<const unsigned char*>(all.data())[b]) * 1099511628211ull;
  std::printf("{\"level\": \"%s\", \"dtype\": \"%s\", \"k\": %ld, \"width\": %ld, \"depth\": %ld, \"worstErrorOverBound\": %.6g, "
              "\"rowsCompared\": %ld, \"rowsDiffering\": %ld, \"bf16OutputsDiffering\": %ld, \"bits\": \"%016llx\"}\n",
              level, bf16 ? "bf16" : "fp32", static_cast<long>(k), static_cast<long>(kernel.width), static_cast<long>(kernel.depth), worst,
              static_cast<long>(compared), static_cast<long>(mismatches), static_cast<long>(bf16_differing),
              static_cast<unsigned long long>(hash));
}

// bf16 values near and below the normal range: products and partial sums fall below 2^-126, where vdpbf16ps reads
// and writes 0. Every bf16 kernel against the plain model of the instruction (dpbf16_model.h): the same bits.
void check_denormals() {
  const int64_t m = 13, k = 37, n = 70;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> exponent(-72, -56), mantissa(0, 127), sign(0, 1), pick(0, 9);
  const auto value = [&]() -> uint16_t {
    if (pick(rng) == 0) return static_cast<uint16_t>(sign(rng) << 15 | (1 + mantissa(rng) % 127));  // a bf16 denormal
    return static_cast<uint16_t>(sign(rng) << 15 | (exponent(rng) + 127) << 7 | mantissa(rng));
  };
  std::vector<uint16_t> x(m * k), w(n * k);
  for (auto& v : x) v = value();
  for (auto& v : w) v = value();  // products 2^-144 ... 2^-112: many steps' results below 2^-126
  std::vector<std::pair<const char*, gemm::Kernel>> kernels{{"model", gemm::dpbf16_model_kernel()}, {"generic-libm", gemm::generic_libm_fma_kernel(true)}};
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16})
    if (isa <= best_isa()) kernels.emplace_back(isa_name(isa), isa == Isa::Avx512Bf16 ? gemm::dpbf16_kernel() : gemm::fma_kernel(isa, true));
  std::vector<std::vector<float>> outs;
  for (const auto& [name, kernel] : kernels) {
    std::vector<char> packed(kernel.packed_bytes(n, k));
    const auto w_rows = gemm::rows_every(w.data(), n, k * 2);
    kernel.pack(gemm::PackSource{w_rows.data(), true}, n, k, packed.data());
    std::vector<float> out(m * n);
    kernel.run(gemm::GemmOperands{x.data(), packed.data(), out.data(), nullptr, m, k, n, k, n, false, false}, 0, kernel.panels(n));
    outs.push_back(out);
  }
  int64_t differing = 0, zeros = 0, tiny = 0;
  for (size_t i = 1; i < outs.size(); ++i) differing += std::memcmp(outs[i].data(), outs[0].data(), outs[0].size() * sizeof(float)) != 0;
  for (float v : outs[0]) {
    zeros += v == 0.0f;
    tiny += v != 0.0f && std::fabs(v) < 0x1p-120f;
  }
  std::printf("{\"check\": \"denormals\", \"kernels\": %zu, \"kernelsDiffering\": %ld, \"zeroOutputs\": %ld, \"tinyOutputs\": %ld, \"outputs\": %zu}\n",
              kernels.size() - 1, static_cast<long>(differing), static_cast<long>(zeros), static_cast<long>(tiny), outs[0].size());
}

// Values placed so that their last element ends a page and the next page is unreadable: a pack that reads past a
// row's end stops the check (SIGSEGV) rather than passing.
class GuardedValues {
 public:
  explicit GuardedValues(size_t count) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes = count * sizeof(uint16_t);
    mapped_ = (bytes + page - 1) / page * page + page;
    base_ = static_cast<char*>(mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED || mprotect(base_ + mapped_ - page, page, PROT_NONE) != 0) std::abort();
    values_ = reinterpret_cast<uint16_t*>(base_ + mapped_ - page - bytes);
  }
  ~GuardedValues() { munmap(base_, mapped_); }
  uint16_t* data() const { return values_; }

 private:
  char* base_;
  size_t mapped_;
  uint16_t* values_;
};

// Each bf16 family's pack (vector forms) against its plain loops (Kernel::plain_pack), byte for byte: rows along k
// (weights, attention's keys) and columns along n (attention's values), rows padded or not, K odd and even, full and
// partial panels. Every byte of the panels compared, from buffers filled differently before.
void check_packing() {
  std::vector<std::pair<const char*, gemm::Kernel>> kernels{{"generic-libm", gemm::generic_libm_fma_kernel(true)}};
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16})
    if (isa <= best_isa()) kernels.emplace_back(isa_name(isa), isa == Isa::Avx512Bf16 ? gemm::dpbf16_kernel() : gemm::fma_kernel(isa, true));
  std::mt19937 rng(5);
  int64_t cases = 0, differing = 0;
  for (const auto& [name, kernel] : kernels)
    for (int64_t n : {1, 7, 16, 31, 32, 33, 64, 65, 100, 128, 200})
      for (int64_t k : {1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 80, 129})
        for (bool rows_along_k : {true, false})
          for (int64_t pad : {0, 3}) {
            // Rows of `length` values, `pad` more between them; the last one ends at the guard.
            const int64_t count = rows_along_k ? n : k, length = rows_along_k ? k : n, stride = length + pad;
            GuardedValues w(static_cast<size_t>((count - 1) * stride + length));
            for (int64_t i = 0; i < (count - 1) * stride + length; ++i) w.data()[i] = static_cast<uint16_t>(rng());
            const auto rows = gemm::rows_every(w.data(), count, stride * 2);
            const gemm::PackSource source{rows.data(), rows_along_k};
            std::vector<char> fast(kernel.packed_bytes(n, k), 'f'), plain(kernel.packed_bytes(n, k), 'p');
            kernel.pack(source, n, k, fast.data());
            (kernel.plain_pack ? kernel.plain_pack : kernel.pack)(source, n, k, plain.data());
            ++cases;
            if (fast != plain) {
              ++differing;
              std::fprintf(stderr, "%s: n %ld k %ld %s pad %ld packs other bytes\n", name, static_cast<long>(n), static_cast<long>(k),
                           rows_along_k ? "rows" : "columns", static_cast<long>(pad));
            }
          }
  std::printf("{\"check\": \"packing\", \"kernels\": %zu, \"vectorKernels\": %ld, \"cases\": %ld, \"casesDiffering\": %ld}\n", kernels.size(),
              static_cast<long>(std::count_if(kernels.begin(), kernels.end(), [](const auto& e) { return e.second.plain_pack != nullptr; })),
              static_cast<long>(cases), static_cast<long>(differing));
}

}  // namespace

int main() {
  check_denormals();
  check_packing();
  for (int64_t k : {2101, 2100})
    for (bool bf16 : {false, true}) check("generic-libm", gemm::generic_libm_fma_kernel(bf16), bf16, k);
  // The native bf16 arithmetic of AMX (its own bits): on the model of the tiles, and on the tiles where the CPU has them.
  // A shorter, odd K (151 pairs: 9 tiles and a last one of 7, the last pair half empty), a tenth of the rows alone:
  // the model is a slow loop.
  check("amx-model", gemm::amx_bf16_model_kernel(), true, 301, 10);
  if (gemm::cpu_has_amx_bf16())
    for (int64_t k : {2101, 2100}) check("amx-bf16", gemm::amx_bf16_kernel(), true, k);
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16}) {
    if (isa > best_isa()) continue;
    for (int64_t k : {2101, 2100})
      for (bool bf16 : {false, true})
        check(isa_name(isa), bf16 && isa == Isa::Avx512Bf16 ? gemm::dpbf16_kernel() : gemm::fma_kernel(isa, bf16), bf16, k);
  }
}
