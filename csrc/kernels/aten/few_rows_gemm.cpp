#include "kernels/aten/few_rows_gemm.h"

#include <algorithm>
#include <stdexcept>

#if TQ_CUDA
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/few_rows_mma.h"
#endif
#include "kernels/math/few_rows_mma_math.h"

namespace tq {
namespace {

// Calls in one row bucket share a choice: 1, 2, 4, 8, ... up to kFewRows. One row is a bucket of its own: cuBLAS
// runs it as a matrix-vector product, whose bits differed from a cold state's with split-K off where 2-128 rows kept
// them (bench/gpu/results/h200-2026-11-30-window, gemm_rows.json, `down`).
int64_t row_bucket(int64_t rows) {
  int64_t bucket = 1;
  while (bucket < rows) bucket *= 2;
  return bucket;
}

at::Tensor padded(const at::Tensor& x, const at::Tensor& w, int64_t rows) {
  if (x.size(0) == rows) return at::linear(x, w);
  auto buffer = at::empty({rows, x.size(1)}, x.options());
  buffer.narrow(0, 0, x.size(0)).copy_(x);
  return at::linear(buffer, w).narrow(0, 0, x.size(0));
}

// The batch of a Columns form: its GEMMs over the output's columns; 0 for another form.
int64_t column_chunks_of(GemmForm form) {
  return form == GemmForm::Columns8 ? 8 : form == GemmForm::Columns32 ? 32 : form == GemmForm::Columns64 ? 64 : 0;
}

at::Tensor column_chunks(const at::Tensor& x, const at::Tensor& w, int64_t c) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  auto out = at::empty({m, n}, x.options());
  // Batch b: x times chunk b of w's rows, into columns [b n/c, (b+1) n/c) of out (a strided view: no copy after).
  auto out_chunks = out.view({m, c, n / c}).transpose(0, 1);
  at::bmm_out(out_chunks, x.unsqueeze(0).expand({c, m, k}), w.view({c, n / c, k}).transpose(1, 2));
  return out;
}

static_assert(few_rows_mma::kMaxRows >= kFewRows, "our kernel takes every row count a few-row form is asked for");
static_assert(kOwnForms.size() == few_rows_mma::kTilingCount, "an Own form for each of the kernel's tilings");

// Which of few_rows_mma::kTilings an Own form runs; -1 for another form.
int own_tiling(GemmForm form) {
  const auto at = std::find(kOwnForms.begin(), kOwnForms.end(), form);
  return at == kOwnForms.end() ? -1 : static_cast<int>(at - kOwnForms.begin());
}

few_rows_mma::Args own_shape(const at::Tensor& x, const at::Tensor& w) {
  return {nullptr, nullptr, nullptr, static_cast<int>(x.size(0)), static_cast<int>(x.size(1)), static_cast<int>(w.size(0))};
}

// Our kernel on x and w in one tiling. Its launch refuses an array off 16 bytes: x is then copied (the copy's start is
// aligned).
at::Tensor own_product(const at::Tensor& x, const at::Tensor& w, int tiling) {
#if TQ_CUDA
  if (!x.is_cuda()) throw std::invalid_argument("our few-row GEMM: a CUDA tensor's form");
  const auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  const auto rows = aligned(x) ? x : x.clone();
  auto y = at::empty({x.size(0), w.size(0)}, x.options());
  auto args = own_shape(x, w);
  args.x = static_cast<const uint16_t*>(rows.data_ptr());
  args.w = static_cast<const uint16_t*>(w.data_ptr());
  args.y = static_cast<uint16_t*>(y.data_ptr());
  const auto stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  if (const cudaError_t e = cuda::launch_few_rows_mma(args, tiling, stream); e != cudaSuccess)
    throw std::runtime_error(std::string("the few-row GEMM's launch: ") + cudaGetErrorString(e));
  return y;
#else
  (void)x, (void)w, (void)tiling;
  throw std::invalid_argument("our few-row GEMM: a build without CUDA");
#endif
}

// A CUDA graph's capture records launches and runs nothing: no time to measure, and no synchronizing allowed.
bool capturing(const at::Tensor& x) {
#if TQ_CUDA
  return x.is_cuda() && c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
  (void)x;
  return false;
#endif
}

}  // namespace

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  const auto as_bits = [](const at::Tensor& t) {
    const auto c = t.contiguous();
    return c.view(c.element_size() == 2 ? at::kShort : c.element_size() == 4 ? at::kInt : at::kLong);
  };
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && at::equal(as_bits(a), as_bits(b));
}

const char* gemm_form_name(GemmForm form) {
  switch (form) {
    case GemmForm::Linear: return "linear";
    case GemmForm::Pad128: return "pad128";
    case GemmForm::Pad256: return "pad256";
    case GemmForm::BiasNegZero: return "bias_neg0";
    case GemmForm::Swapped: return "swapped";
    case GemmForm::Columns8: return "cols8";
    case GemmForm::Columns32: return "cols32";
    case GemmForm::Columns64: return "cols64";
    case GemmForm::Own32x16: return "own_32x16";
    case GemmForm::Own16x16: return "own_16x16";
    case GemmForm::Own16x8: return "own_16x8";
    case GemmForm::Own32x8: return "own_32x8";
  }
  return "?";
}

bool gemm_form_applies(GemmForm form, const at::Tensor& x, const at::Tensor& w) {
  const int64_t rows = x.size(0), out_features = w.size(0);
  switch (form) {
    // At most the pad: so a pad chosen in a row bucket applies to every row count of it (a bucket ends at a power of two).
    case GemmForm::Pad128: return rows <= 128;
    case GemmForm::Pad256: return rows <= 256;
    case GemmForm::Columns8:
    case GemmForm::Columns32:
    case GemmForm::Columns64: return out_features % column_chunks_of(form) == 0;
    // At most kMaxRows (kFewRows): so in a row bucket, every row count.
    case GemmForm::Own32x16:
    case GemmForm::Own16x16:
    case GemmForm::Own16x8:
    case GemmForm::Own32x8:
      return x.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16 && x.is_contiguous() && w.is_contiguous() &&
             few_rows_mma::fits(own_shape(x, w), few_rows_mma::kTilings[own_tiling(form)]);
    default: return true;
  }
}

at::Tensor gemm_in_form(GemmForm form, const at::Tensor& x, const at::Tensor& w, const at::Tensor& neg_zero) {
  switch (form) {
    case GemmForm::Linear: return at::linear(x, w);
    case GemmForm::Pad128: return padded(x, w, 128);
    case GemmForm::Pad256: return padded(x, w, 256);
    case GemmForm::BiasNegZero: return at::addmm(neg_zero, x, w.t());
    case GemmForm::Swapped: return at::mm(w, x.t()).t().contiguous();
    case GemmForm::Columns8:
    case GemmForm::Columns32:
    case GemmForm::Columns64: return column_chunks(x, w, column_chunks_of(form));
    case GemmForm::Own32x16:
    case GemmForm::Own16x16:
    case GemmForm::Own16x8:
    case GemmForm::Own32x8: return own_product(x, w, own_tiling(form));
  }
  throw std::logic_error("gemm_in_form: no such form");
}

GemmForm fastest_keeping_bits(const std::vector<GemmFormTrial>& trials) {
  const GemmFormTrial* best = nullptr;
  for (const auto& t : trials)
    if (t.same_bits && (!best || t.us < best->us)) best = &t;
  return best ? best->form : GemmForm::Linear;
}

FewRowsGemm::FewRowsGemm(Timer time_us, bool own_kernel) : time_us_(std::move(time_us)), candidates_(kCublasForms.begin(), kCublasForms.end()) {
  if (own_kernel) candidates_.insert(candidates_.end(), kOwnForms.begin(), kOwnForms.end());
}

at::Tensor FewRowsGemm::operator()(const at::Tensor& x, const at::Tensor& w) {
  if (x.size(0) > kFewRows || x.size(0) == 0) return at::linear(x, w);
  const Key key{w.size(0), w.size(1), static_cast<int>(w.scalar_type()), row_bucket(x.size(0))};
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = chosen_.find(key);
  if (found == chosen_.end()) {
    if (!time_us_ || capturing(x)) return at::linear(x, w);
    found = chosen_.emplace(key, measure(x, w, neg_zero(w))).first;
  }
  const auto form = gemm_form_applies(found->second.form, x, w) ? found->second.form : GemmForm::Linear;
  return gemm_in_form(form, x, w, form == GemmForm::BiasNegZero ? neg_zero(w) : at::Tensor());
}

FewRowsGemm::Choice FewRowsGemm::measure(const at::Tensor& x, const at::Tensor& w, const at::Tensor& neg_zero) const {
  // The cold state's GEMM: x's rows first among kColdRows (the rest zeros), as plain at::linear computes them.
  auto cold_rows = at::zeros({kColdRows, x.size(1)}, x.options());
  cold_rows.narrow(0, 0, x.size(0)).copy_(x);
  const auto cold = at::linear(cold_rows, w).narrow(0, 0, x.size(0));
  Choice choice;
  for (const auto form : candidates_) {
    if (!gemm_form_applies(form, x, w)) continue;
    try {
      const bool same = same_bits(gemm_in_form(form, x, w, neg_zero), cold);
      choice.trials.push_back({form, time_us_(form, x, w, neg_zero), same});
    } catch (const std::exception&) {
      // A form this torch refuses for these tensors is no candidate; the call goes on with the others.
    }
  }
  choice.form = fastest_keeping_bits(choice.trials);
  return choice;
}

const at::Tensor& FewRowsGemm::neg_zero(const at::Tensor& w) {
  auto& bias = neg_zeros_[{w.size(0), static_cast<int>(w.scalar_type())}];
  if (!bias.defined()) bias = at::full({w.size(0)}, -0.0, w.options());
  return bias;
}

#if TQ_CUDA
double cuda_call_us(const std::function<void()>& call, at::Device device, int reps, int rounds) {
  const auto stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  call();  // a first call: handles, workspaces, lazily loaded kernels
  std::vector<double> us;
  for (int r = 0; r < rounds; ++r) {
    // The GPU sleeps while the host queues the calls, then runs them back to back: their time, not the launches'.
    at::cuda::sleep(int64_t{1} << 20);
    cudaEventRecord(start, stream);
    for (int i = 0; i < reps; ++i) call();
    cudaEventRecord(end, stream);
    cudaEventSynchronize(end);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, end);
    us.push_back(1000.0 * ms / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

FewRowsGemm::Timer cuda_gemm_timer(int reps, int rounds) {
  return [reps, rounds](GemmForm form, const at::Tensor& x, const at::Tensor& w, const at::Tensor& neg_zero) {
    return cuda_call_us([&] { gemm_in_form(form, x, w, neg_zero); }, x.device(), reps, rounds);
  };
}
#else
double cuda_call_us(const std::function<void()>&, at::Device, int, int) { throw std::logic_error("cuda_call_us: a build without CUDA"); }
FewRowsGemm::Timer cuda_gemm_timer(int, int) { return nullptr; }
#endif

}  // namespace tq
