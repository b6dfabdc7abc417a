#include "kernels/cpu/invariant_gemm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/vec_exp.h"

// Vector types are passed by value between inlined helpers only (see flatten below).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tq {
namespace {

// GCC vector types of the target's register width: the same source compiles
// to zmm (AVX-512), ymm (AVX2) or xmm (portable) registers, chosen by the
// target of the function it is inlined into (a wider type than the registers
// would live on the stack).
template <int L>
struct Lanes;
template <>
struct Lanes<4> {
  typedef float F __attribute__((vector_size(16)));
  typedef uint32_t U __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef uint32_t U __attribute__((vector_size(64)));
};

// A micro-tile is kTileRows rows by two vectors of columns, its sums held in
// registers over a block of k: 12 accumulators, of 16 registers (AVX2, SSE) or 32 (AVX-512).
constexpr int kTileRows = 6;
constexpr int kTileVectors = 2;
// Rows and k per block: the packed activations of a block (96 x 256 fp32, 96 KiB)
// stay in L2 while every panel of the thread passes over them; a panel's
// 256 x 16 slice (16 KiB fp32) stays in L1 across the block's 16 tiles.
// Measured on bench-llama shapes (AVX2, 2 threads), see README.
constexpr int64_t kBlockRows = 96;
constexpr int64_t kBlockK = 256;

template <int L>
inline typename Lanes<L>::F load(const float* p) {
  typename Lanes<L>::F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// A tile's two weight vectors for one k. fp32: two loads. bf16: one load of
// 2L values packed in pairs (column c in the low half of word c, column L + c
// in the high half), widened exactly by a shift and a mask: bf16's bits are
// the high half of the fp32's. Measured 1.4x faster than widening two 8-value
// loads (AVX2, bench shapes: 180 against 130 GFLOP/s), as fast as fp32.
template <int L>
inline void load_tile_weights(const float* p, typename Lanes<L>::F (&w)[2]) {
  w[0] = load<L>(p);
  w[1] = load<L>(p + L);
}
template <int L>
inline void load_tile_weights(const uint16_t* p, typename Lanes<L>::F (&w)[2]) {
  typename Lanes<L>::U pairs;
  std::memcpy(&pairs, p, sizeof pairs);
  w[0] = (typename Lanes<L>::F)(pairs << 16);
  w[1] = (typename Lanes<L>::F)(pairs & 0xffff0000u);
}
template <int L>
inline void store(float* p, typename Lanes<L>::F v) { std::memcpy(p, &v, sizeof v); }
inline float widen(float x) { return x; }
inline float widen(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct Job {
  const void* x;       // [M, K] in the weights' dtype, rows lda apart
  const void* panels;  // [P, K, panel]
  float* out;          // [M, N], rows ldc apart
  const float* bias;   // [P * panel] zero-padded, or null
  int64_t m, k, n, lda, ldc;
  bool accumulate;
};

// c[r][v] = fma(a[k][r], b[k][v], c[r][v]) for k in [0, kc): the one order every output sees.
template <int L, typename W>
inline void tile_kernel(int64_t kc, const float* a, const W* b, typename Lanes<L>::F (&c)[kTileRows][kTileVectors]) {
  for (int64_t k = 0; k < kc; ++k) {
    typename Lanes<L>::F w[kTileVectors];
    load_tile_weights<L>(b + k * kTileVectors * L, w);
    for (int r = 0; r < kTileRows; ++r) {
      const float s = a[k * kTileRows + r];
      for (int v = 0; v < kTileVectors; ++v) c[r][v] += s * w[v];
    }
  }
}

// The thread's panels [p_begin, p_end) for all rows: blocks of rows, then of k.
template <int L, typename T>
inline void run_panels(const Job& job, int64_t p_begin, int64_t p_end) {
  constexpr int64_t panel = kTileVectors * L;
  const T* x = static_cast<const T*>(job.x);
  const T* panels = static_cast<const T*>(job.panels);
  thread_local std::vector<float> packed;  // [tiles][kc][kTileRows], this thread's copy
  packed.resize(static_cast<size_t>(kBlockRows * kBlockK));
  for (int64_t m0 = 0; m0 < job.m; m0 += kBlockRows) {
    const int64_t mc = std::min(kBlockRows, job.m - m0), tiles = (mc + kTileRows - 1) / kTileRows;
    for (int64_t k0 = 0; k0 < job.k; k0 += kBlockK) {
      const int64_t kc = std::min(kBlockK, job.k - k0);
      // The block's rows in fp32, interleaved so that a tile reads its k-th values together (rows past M are 0).
      for (int64_t t = 0; t < tiles; ++t)
        for (int r = 0; r < kTileRows; ++r) {
          const int64_t row = m0 + t * kTileRows + r;
          float* dst = packed.data() + t * kc * kTileRows + r;
          if (row < job.m) {
            const T* src = x + row * job.lda + k0;
            for (int64_t k = 0; k < kc; ++k) dst[k * kTileRows] = widen(src[k]);
          } else {
            for (int64_t k = 0; k < kc; ++k) dst[k * kTileRows] = 0.0f;
          }
        }
      const bool fresh = k0 == 0 && !job.accumulate;
      for (int64_t p = p_begin; p < p_end; ++p) {
        const T* b = panels + (p * job.k + k0) * panel;
        const int64_t col0 = p * panel, cols = std::min(panel, job.n - col0);
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t row0 = m0 + t * kTileRows, rows = std::min<int64_t>(kTileRows, job.m - row0);
          float* c = job.out + row0 * job.ldc + col0;
          typename Lanes<L>::F acc[kTileRows][kTileVectors];
          // Partial tiles (the last rows or columns) go through a full-size copy.
          const bool whole = rows == kTileRows && cols == panel;
          alignas(64) float edge[kTileRows][panel];
          float* src = c;
          int64_t ld = job.ldc;
          if (!whole && !fresh) {
            std::memset(edge, 0, sizeof edge);
            for (int64_t r = 0; r < rows; ++r) std::memcpy(edge[r], c + r * job.ldc, cols * sizeof(float));
            src = &edge[0][0];
            ld = panel;
          }
          for (int r = 0; r < kTileRows; ++r)
            for (int v = 0; v < kTileVectors; ++v)
              acc[r][v] = !fresh ? load<L>(src + r * ld + v * L) : job.bias ? load<L>(job.bias + col0 + v * L) : typename Lanes<L>::F{};
          tile_kernel<L>(kc, packed.data() + t * kc * kTileRows, b, acc);
          if (whole) {
            for (int r = 0; r < kTileRows; ++r)
              for (int v = 0; v < kTileVectors; ++v) store<L>(c + r * job.ldc + v * L, acc[r][v]);
          } else {
            for (int r = 0; r < kTileRows; ++r)
              for (int v = 0; v < kTileVectors; ++v) store<L>(&edge[r][v * L], acc[r][v]);
            for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * job.ldc, edge[r], cols * sizeof(float));
          }
        }
      }
    }
  }
}

using PanelsFn = void (*)(const Job&, int64_t, int64_t);

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vl,fma"), flatten)) void panels_avx512_f32(const Job& j, int64_t a, int64_t b) {
  run_panels<16, float>(j, a, b);
}
__attribute__((target("avx512f,avx512bw,avx512vl,fma"), flatten)) void panels_avx512_bf16(const Job& j, int64_t a, int64_t b) {
  run_panels<16, uint16_t>(j, a, b);
}
__attribute__((target("avx2,fma"), flatten)) void panels_avx2_f32(const Job& j, int64_t a, int64_t b) { run_panels<8, float>(j, a, b); }
__attribute__((target("avx2,fma"), flatten)) void panels_avx2_bf16(const Job& j, int64_t a, int64_t b) { run_panels<8, uint16_t>(j, a, b); }
#endif
__attribute__((flatten)) void panels_portable_f32(const Job& j, int64_t a, int64_t b) { run_panels<4, float>(j, a, b); }
__attribute__((flatten)) void panels_portable_bf16(const Job& j, int64_t a, int64_t b) { run_panels<4, uint16_t>(j, a, b); }

enum class Isa { Avx512, Avx2, Portable };

// Decided once per process, so that every call of an engine takes one path.
Isa cpu_isa() {
  static const Isa isa = [] {
#if defined(__x86_64__)
    if (has_avx512()) return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !std::getenv("TQ_PORTABLE_KERNELS")) return Isa::Avx2;
#endif
    return Isa::Portable;
  }();
  return isa;
}

PanelsFn panels_fn(bool bf16) {
  switch (cpu_isa()) {
#if defined(__x86_64__)
    case Isa::Avx512:
      return bf16 ? panels_avx512_bf16 : panels_avx512_f32;
    case Isa::Avx2:
      return bf16 ? panels_avx2_bf16 : panels_avx2_f32;
#endif
    default:
      return bf16 ? panels_portable_bf16 : panels_portable_f32;
  }
}

template <typename T>
void pack_panels(const T* w, int64_t n, int64_t k, int64_t stride_n, int64_t stride_k, T* dst) {
  const int64_t panel = invariant_gemm::panel_width(), half = panel / 2;
  for (int64_t p = 0; p < invariant_gemm::panels(n); ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t c = 0; c < panel; ++c) {
        // bf16 columns go in pairs (c, c + panel / 2), for load_tile_weights.
        const int64_t col = p * panel + (sizeof(T) == 2 ? (c % 2) * half + c / 2 : c);
        *dst++ = col < n ? w[col * stride_n + kk * stride_k] : T{};
      }
}

}  // namespace

namespace invariant_gemm {

int64_t panel_width() {
  switch (cpu_isa()) {
    case Isa::Avx512:
      return kTileVectors * 16;
    case Isa::Avx2:
      return kTileVectors * 8;
    default:
      return kTileVectors * 4;
  }
}

const char* isa() {
  switch (cpu_isa()) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "portable";
  }
}

void pack(const void* w, bool bf16, int64_t n, int64_t k, int64_t stride_n, int64_t stride_k, void* dst) {
  if (bf16) pack_panels(static_cast<const uint16_t*>(w), n, k, stride_n, stride_k, static_cast<uint16_t*>(dst));
  else pack_panels(static_cast<const float*>(w), n, k, stride_n, stride_k, static_cast<float*>(dst));
}

void multiply(const void* a, int64_t lda, bool bf16, const void* packed, int64_t m, int64_t k, int64_t n, float* out, int64_t ldc, bool accumulate) {
  if (m == 0) return;
  const Job job{a, packed, out, nullptr, m, k, n, lda, ldc, accumulate};
  panels_fn(bf16)(job, 0, panels(n));
}

}  // namespace invariant_gemm

InvariantGemm::InvariantGemm(const at::Tensor& weight, const at::Tensor& bias)
    : in_(weight.size(1)), out_(weight.size(0)), dtype_(weight.scalar_type()) {
  TORCH_CHECK(dtype_ == at::kFloat || dtype_ == at::kBFloat16, "InvariantGemm: fp32 or bf16 weights, got ", dtype_);
  const int64_t padded = invariant_gemm::panels(out_) * invariant_gemm::panel_width();
  auto w = weight.contiguous();
  panels_ = at::empty({padded * in_}, w.options());
  invariant_gemm::pack(w.data_ptr(), dtype_ == at::kBFloat16, out_, in_, in_, 1, panels_.data_ptr());
  if (bias.defined()) {
    bias_ = at::zeros({padded}, at::kFloat);
    bias_.slice(0, 0, out_).copy_(bias.to(at::kFloat).reshape({out_}));
  }
}

void InvariantGemm::run(const at::Tensor& x, at::Tensor& out, bool accumulate) const {
  TORCH_CHECK(x.scalar_type() == dtype_ && x.dim() == 2 && x.size(1) == in_ && x.is_contiguous(), "InvariantGemm: input ", x.sizes(), " ",
              x.scalar_type(), " for weights [", out_, ", ", in_, "] ", dtype_);
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.is_contiguous() && out.dim() == 2 && out.size(0) == x.size(0) && out.size(1) == out_,
              "InvariantGemm: output ", out.sizes(), " ", out.scalar_type());
  const int64_t m = x.size(0);
  if (m == 0) return;
  const Job job{x.data_ptr(), panels_.data_ptr(), out.data_ptr<float>(), bias_.defined() ? bias_.data_ptr<float>() : nullptr,
                m, in_, out_, in_, out_, accumulate};
  const PanelsFn fn = panels_fn(dtype_ == at::kBFloat16);
  // Columns are split between threads: no output is ever summed by two of them.
  at::parallel_for(0, invariant_gemm::panels(out_), 1, [&](int64_t a, int64_t b) { fn(job, a, b); });
}

}  // namespace tq
