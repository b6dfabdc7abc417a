// kernels/aten/few_rows_gemm.h on the CPU, where the CUDA engine's choice runs all but its GPU clock:
//  - each form is x w^T: float64, against at::linear, on row counts from 1 to past kFewRows;
//  - the choice takes the fastest trial that keeps the bits, at::linear where none does;
//  - FewRowsGemm measures once per shape and row bucket, returns a result bit-identical to the cold state's GEMM
//    (the same rows among kColdRows, plain at::linear), never takes a form that did not keep the bits, and leaves
//    rows above kFewRows to at::linear;
//  - our kernel's forms (one a tiling) apply to the shapes each takes alone, are tried only where asked for, and, where
//    their call fails (here: a CPU tensor, which they refuse), are no candidates: the choice goes on with cuBLAS's forms.
// A stand-in clock (a cost per form) makes the choice's inputs known. Prints one JSON object a line.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "kernels/aten/few_rows_gemm.h"

using namespace tq;

namespace {

void forms_are_the_product() {
  int cases = 0;
  double worst = 0;
  const auto w = at::randn({64, 64}, at::kDouble);  // 64 columns: every batch over them applies
  const auto neg_zero = at::full({64}, -0.0, at::kDouble);
  for (const int64_t rows : {1, 7, 8, 31, 100, 128, 200, 256, 300}) {
    const auto x = at::randn({rows, 64}, at::kDouble);
    const auto want = at::linear(x, w);
    for (const auto form : kCublasForms) {
      if (!gemm_form_applies(form, x, w)) continue;
      const auto got = gemm_in_form(form, x, w, neg_zero);
      if (got.sizes() != want.sizes()) {
        std::printf("{\"check\":\"forms\",\"form\":\"%s\",\"rows\":%ld,\"error\":\"shape\"}\n", gemm_form_name(form), static_cast<long>(rows));
        return;
      }
      worst = std::max(worst, (got - want).abs().max().item<double>());
      ++cases;
    }
  }
  std::printf("{\"check\":\"forms\",\"cases\":%d,\"max_diff\":%.3e}\n", cases, worst);
}

void choice_of_trials() {
  using F = GemmForm;
  const bool fastest = fastest_keeping_bits({{F::Linear, 9, true}, {F::Pad128, 3, true}, {F::Swapped, 5, true}}) == F::Pad128;
  const bool skips_other_bits = fastest_keeping_bits({{F::Linear, 9, true}, {F::Pad128, 1, false}, {F::Swapped, 5, true}}) == F::Swapped;
  const bool linear_when_none = fastest_keeping_bits({{F::Linear, 9, false}, {F::Pad128, 1, false}}) == F::Linear;
  std::printf("{\"check\":\"choice\",\"fastest\":%s,\"skips_other_bits\":%s,\"linear_when_none\":%s}\n", fastest ? "true" : "false",
              skips_other_bits ? "true" : "false", linear_when_none ? "true" : "false");
}

// Each of our kernel's forms (a tiling each) takes bf16 rows 1 to kFewRows, K in whole stages, columns in whole blocks
// of its own width (16 or 8), contiguous; no other shape or dtype.
void own_forms_apply() {
  const auto bf16 = [](std::initializer_list<int64_t> sizes) { return at::zeros(sizes, at::kBFloat16); };
  const auto w = bf16({32, 128});
  bool takes = true, refuses = true, widths = true;
  for (const auto form : kOwnForms) {
    takes = takes && gemm_form_applies(form, bf16({24, 128}), w) && gemm_form_applies(form, bf16({1, 128}), w) &&
            gemm_form_applies(form, bf16({kFewRows, 128}), w);
    refuses = refuses && !gemm_form_applies(form, bf16({kFewRows + 1, 128}), w) &&   // rows past kFewRows
              !gemm_form_applies(form, bf16({8, 96}), bf16({32, 96})) &&               // K not in whole stages
              !gemm_form_applies(form, bf16({8, 128}), bf16({20, 128})) &&             // columns not in whole blocks of 8
              !gemm_form_applies(form, at::zeros({8, 128}), at::zeros({32, 128})) &&   // fp32
              !gemm_form_applies(form, bf16({128, 8}).t(), w);                          // x not contiguous
    // 24 columns: whole blocks of 8 (the 16 x 8 and 32 x 8 tilings), not of 16.
    const bool eight_wide = form == GemmForm::Own16x8 || form == GemmForm::Own32x8;
    widths = widths && gemm_form_applies(form, bf16({8, 128}), bf16({24, 128})) == eight_wide;
  }
  std::printf("{\"check\":\"own_applies\",\"forms\":%zu,\"takes\":%s,\"refuses\":%s,\"widths\":%s}\n", kOwnForms.size(), takes ? "true" : "false",
              refuses ? "true" : "false", widths ? "true" : "false");
}

// The stand-in clock: `cheapest` costs 1 µs, every other form 10; and how many times each was timed. own_kernel: our
// kernel's forms candidates too.
void measured_choice(GemmForm cheapest, bool own_kernel = false) {
  std::map<GemmForm, int> timed;
  FewRowsGemm gemm(
      [&](GemmForm form, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
        ++timed[form];
        return form == cheapest ? 1.0 : 10.0;
      },
      own_kernel);
  const auto w = at::randn({256, 128}).to(at::kBFloat16);
  bool same_as_cold = true;
  // 24 rows measure bucket 32; 32 and 17 rows reuse its choice; 300 are above kFewRows (at::linear, nothing measured).
  for (const int64_t rows : {24, 32, 17, 300}) {
    const auto x = at::randn({rows, 128}).to(at::kBFloat16);
    auto cold_rows = at::zeros({kColdRows, 128}, x.options());
    cold_rows.narrow(0, 0, rows).copy_(x);
    same_as_cold = same_as_cold && at::equal(gemm(x, w).view(at::kShort), at::linear(cold_rows, w).narrow(0, 0, rows).contiguous().view(at::kShort));
  }
  int timings = 0;
  for (const auto& [form, n] : timed) timings += n;
  const auto& choices = gemm.choices();
  const auto& only = choices.begin()->second;
  const size_t choices_of_rows = choices.size();
  gemm(at::randn({1, 128}).to(at::kBFloat16), w);  // one row: a bucket of its own (cuBLAS's matrix-vector product)
  bool cheapest_kept_bits = false;
  for (const auto& t : only.trials)
    if (t.form == cheapest) cheapest_kept_bits = t.same_bits;
  // The form chosen: the cheapest where its bits held, and never one whose bits did not.
  const bool chose_right = cheapest_kept_bits ? only.form == cheapest : only.form != cheapest;
  std::printf("{\"check\":\"measured\",\"own_kernel\":%s,\"cheapest\":\"%s\",\"choices\":%zu,\"trials\":%zu,\"timings\":%d,\"cheapest_kept_bits\":%s,"
              "\"chosen\":\"%s\",\"chose_right\":%s,\"same_as_cold\":%s,\"choices_with_one_row\":%zu}\n",
              own_kernel ? "true" : "false", gemm_form_name(cheapest), choices_of_rows, only.trials.size(), timings, cheapest_kept_bits ? "true" : "false",
              gemm_form_name(only.form), chose_right ? "true" : "false", same_as_cold ? "true" : "false", choices.size());
}

}  // namespace

int main() {
  at::manual_seed(0);
  forms_are_the_product();
  choice_of_trials();
  own_forms_apply();
  for (const auto form : kCublasForms) measured_choice(form);
  // Asked for, our kernel is tried; on the CPU its call fails, so it is neither timed nor chosen.
  for (const auto form : kOwnForms) measured_choice(form, /*own_kernel=*/true);
  return 0;
}
