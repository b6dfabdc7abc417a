// The batch-invariant GEMM on few rows: y = x w^T in the form that is fastest
// and gives each row the bits a cold state's GEMM gives it.
//
// Batch-invariant on CUDA, cuBLAS never splits a GEMM's reduction along K
// (aten_layer_kernels.cpp). On few rows its choice without split-K can be a
// poor one: for bench-qwen3's `down` on a warm question's 32 rows, one kernel
// with 64x256 tiles, half of the warm call's GPU time on an H200 (docs/gpu.md,
// "The window of 2026-11-30"). The same products can be asked of cuBLAS in
// other forms, each chosen for apart (GemmForm), and kernels without split-K
// have given a row the same bits whatever its tile. So the first call of each
// shape and row bucket, outside a graph's capture, runs every form, keeps
// those whose rows are bit-identical to the same rows inside a cold state's
// GEMM (kColdRows rows, plain at::linear), and takes the fastest of them; a
// capture replays what was chosen. Where none keeps the bits, at::linear.
// bench/gpu/gemm_probe.py times the same forms with torch alone. Our own kernel (kernels/cuda/few_rows_mma.h) is one
// more form for each of its tilings, candidates only where the engine asks for them (ownGemm) until a GPU has run them.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace tq {

enum class GemmForm {
  Linear,       // at::linear(x, w)
  Pad128,       // x's rows copied into 128 (the rest left as they are: no row's products mix with another's)
  Pad256,       // into 256
  BiasNegZero,  // addmm with a -0.0 bias (y + -0.0 is y, a signed zero too): cuBLASLt's bias epilogue
  Swapped,      // (w x^T)^T: the transposed problem
  Columns8,     // a batch of 8 GEMMs over the output's columns, written in place
  Columns32,    // of 32: more tiles over few rows, each reading fewer of the weights' rows
  Columns64,    // of 64
  // Our kernel: the tensor cores down K in order (kernels/cuda/few_rows_mma.h), bf16, CUDA builds; a form a tiling of
  // it (few_rows_mma::kTilings, in its order: a block's rows x columns). The same bits from each.
  Own32x16,
  Own16x16,
  Own16x8,
  Own32x8,
};
// cuBLAS's forms: always candidates; ours where asked for.
constexpr std::array<GemmForm, 4> kOwnForms = {GemmForm::Own32x16, GemmForm::Own16x16, GemmForm::Own16x8, GemmForm::Own32x8};
constexpr std::array<GemmForm, 8> kCublasForms = {GemmForm::Linear,  GemmForm::Pad128,   GemmForm::Pad256,    GemmForm::BiasNegZero,
                                                  GemmForm::Swapped, GemmForm::Columns8, GemmForm::Columns32, GemmForm::Columns64};
const char* gemm_form_name(GemmForm form);

// Whether `form` applies to x [rows, in] on w [out, in] (a pad at or above the rows, columns that divide into its
// batch, a shape and dtype our kernel takes).
bool gemm_form_applies(GemmForm form, const at::Tensor& x, const at::Tensor& w);

// y = x w^T in `form`; neg_zero: [out] of -0.0 in w's dtype (BiasNegZero's bias).
at::Tensor gemm_in_form(GemmForm form, const at::Tensor& x, const at::Tensor& w, const at::Tensor& neg_zero);

struct GemmFormTrial {
  GemmForm form;
  double us = 0;           // a call, as measured
  bool same_bits = false;  // its rows as a cold state's GEMM gives them
};
// The fastest trial that keeps the bits; Linear where none does.
GemmForm fastest_keeping_bits(const std::vector<GemmFormTrial>& trials);

constexpr int64_t kFewRows = 256;    // above: at::linear, whose kernels for many rows are cuBLAS's best
constexpr int64_t kColdRows = 1024;  // the cold state's GEMM a row's bits are checked against

// The forms chosen, one per (out, in, dtype, row bucket), shared by a model's linears. time_us(form, x, w) measures a
// call (the CUDA engine: on the GPU's clock, launches queued ahead); null on a device that cannot be timed now.
// own_kernel: kOwnForms among the candidates too.
class FewRowsGemm {
 public:
  using Timer = std::function<double(GemmForm, const at::Tensor& x, const at::Tensor& w, const at::Tensor& neg_zero)>;
  explicit FewRowsGemm(Timer time_us, bool own_kernel = false);
  // y = x w^T. While a CUDA graph is captured nothing is measured: what was chosen is captured (Linear before a choice).
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& w);
  // What was chosen, and the trials behind it, by key: for the check and the window's record.
  struct Choice {
    GemmForm form = GemmForm::Linear;
    std::vector<GemmFormTrial> trials;
  };
  using Key = std::tuple<int64_t, int64_t, int, int64_t>;  // out, in, dtype, row bucket (a power of two)
  const std::map<Key, Choice>& choices() const { return chosen_; }

 private:
  Choice measure(const at::Tensor& x, const at::Tensor& w, const at::Tensor& neg_zero) const;
  const at::Tensor& neg_zero(const at::Tensor& w);
  Timer time_us_;
  std::vector<GemmForm> candidates_;
  std::mutex mutex_;  // the maps below: a model's linears share them
  std::map<Key, Choice> chosen_;
  std::map<std::pair<int64_t, int>, at::Tensor> neg_zeros_;  // by out, dtype (a model's linears share one device)
};

// Bit for bit, a signed zero's sign and a NaN's payload too (at::equal compares values).
bool same_bits(const at::Tensor& a, const at::Tensor& b);

// A call's time on the GPU: `reps` calls queued behind a sleeping kernel (so the GPU runs them back to back, not at the
// host's launch pace), timed by CUDA events on the current stream; the median of `rounds`, in µs. CUDA builds only.
double cuda_call_us(const std::function<void()>& call, at::Device device, int reps = 8, int rounds = 3);

// The CUDA engine's timer: cuda_call_us of a form's call. Null where the build has no CUDA.
FewRowsGemm::Timer cuda_gemm_timer(int reps = 8, int rounds = 3);

}  // namespace tq
