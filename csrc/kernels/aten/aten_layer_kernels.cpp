#include "kernels/aten/aten_layer_kernels.h"

#include <torch/version.h>

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "batch/visibility.h"
#include "kernels/aten/few_rows_gemm.h"
#include "kernels/aten/fp8_linear.h"

namespace tq {
namespace {

class AtenLinear : public Linear {
 public:
  // few_rows: where set, x w^T on few rows in the form it chose (few_rows_gemm.h); else at::linear.
  AtenLinear(const at::Tensor& weight, const at::Tensor& bias, at::Device device, std::shared_ptr<FewRowsGemm> few_rows)
      : weight_(weight.to(device).contiguous()), bias_(bias.defined() ? bias.to(device, at::kFloat) : at::Tensor()), few_rows_(std::move(few_rows)) {}
  at::Tensor operator()(const at::Tensor& x, at::ScalarType out_dtype) const override {
    auto y = product(x);
    if (bias_.defined()) y = y.to(at::kFloat).add_(bias_);
    return y.to(out_dtype);
  }
  void add_into(const at::Tensor& x, at::Tensor& residual) const override { residual.add_(product(x).to(at::kFloat)); }
  at::ScalarType natural_dtype() const override { return bias_.defined() ? at::kFloat : weight_.scalar_type(); }

 private:
  at::Tensor product(const at::Tensor& x) const {
    const auto in = x.to(weight_.scalar_type());
    return few_rows_ && in.dim() == 2 ? (*few_rows_)(in.contiguous(), weight_) : at::linear(in, weight_);
  }
  int64_t bytes() const override { return weight_.nbytes() + (bias_.defined() ? bias_.nbytes() : 0); }
  at::Tensor weight_, bias_;
  std::shared_ptr<FewRowsGemm> few_rows_;
};

// q: [Tq, heads, dim]; k, v: [Tk, kv_heads, dim]; visible: [Tq, Tk] bool. Returns [Tq, heads, dim].
// softcap > 0: the scaled scores are soft-capped before the mask (no fused kernel does that).
at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible, double softcap) {
  const int64_t group = q.size(1) / k.size(1);
  // [heads, T, dim], the key/value heads repeated for their query heads (GQA).
  auto qh = q.permute({1, 0, 2});
  auto kh = k.repeat_interleave(group, 1).permute({1, 0, 2});
  auto vh = v.repeat_interleave(group, 1).permute({1, 0, 2});
#if TORCH_VERSION_MAJOR >= 2
  if (q.is_cuda() && softcap <= 0) {
    // Fused attention (memory-efficient kernel; fp32 accumulation) with an arbitrary mask.
    auto out = at::scaled_dot_product_attention(qh.unsqueeze(0), kh.unsqueeze(0), vh.unsqueeze(0), visible.unsqueeze(0).unsqueeze(0));
    return out.squeeze(0).permute({1, 0, 2}).contiguous();
  }
#endif
  // Scores and softmax in fp32, as the CPU kernels compute them.
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
  auto scores = at::matmul(qh.to(at::kFloat), kh.to(at::kFloat).transpose(1, 2)).mul_(scale);
  if (softcap > 0) scores = scores.div_(softcap).tanh_().mul_(softcap);
  scores.masked_fill_(visible.logical_not().unsqueeze(0), -INFINITY);
  auto mixed = at::matmul(scores.softmax(-1), vh.to(at::kFloat));
  return mixed.permute({1, 0, 2}).to(q.scalar_type()).contiguous();
}

// A step's attention, split by state: the queries of one state see only that state's keys, so
// each state attends over its own keys alone (a dense mask over a step of 16 states of 1,000
// tokens would be 16 times the work), and its mask is built over those keys alone.
class MaskedAttention : public StepAttention {
 public:
  struct Group {
    at::Tensor queries, keys;  // int64 indices on the device; undefined when the step is one group
    at::Tensor visible;        // [queries, keys] bool on the device
  };
  MaskedAttention(std::vector<Group> groups, double softcap) : groups_(std::move(groups)), softcap_(softcap) {}
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const override {
    if (groups_.size() == 1 && !groups_[0].queries.defined()) return masked_attention(q, k, v, groups_[0].visible, softcap_);
    auto out = at::empty_like(q);
    for (const auto& g : groups_)
      out.index_copy_(0, g.queries, masked_attention(q.index_select(0, g.queries), k.index_select(0, g.keys), v.index_select(0, g.keys), g.visible, softcap_));
    return out;
  }

 private:
  std::vector<Group> groups_;
  double softcap_;
};

class AtenLayerKernels : public LayerKernels {
 public:
  AtenLayerKernels(at::Device device, Quantization quantization, std::shared_ptr<FewRowsGemm> few_rows)
      : device_(device), quantization_(quantization), few_rows_(std::move(few_rows)) {}
  std::string name() const override { return "aten"; }
  at::Device device() const override { return device_; }
  const FewRowsGemm* few_rows_gemm() const override { return few_rows_.get(); }
  std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const override {
    if (quantization_ == Quantization::Fp8) return fp8_linear(weight, bias, device_);
    return std::make_unique<AtenLinear>(weight, bias, device_, few_rows_for(weight));
  }
  std::unique_ptr<Linear> unquantized_linear(const at::Tensor& weight) const override {
    return std::make_unique<AtenLinear>(weight, at::Tensor(), device_, few_rows_for(weight));
  }
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, at::ScalarType out_dtype) const override {
    auto xf = x.to(at::kFloat);
    return (xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true).add_(eps)) * w).to(out_dtype).contiguous();
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                  at::ScalarType out_dtype) const override {
    const int64_t half = x.size(-1) / 2;
    auto c = cos.index_select(0, positions).unsqueeze(1), s = sin.index_select(0, positions).unsqueeze(1);
    auto rotated = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
    return (x * c + rotated * s).to(out_dtype).contiguous();
  }
  at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) const override {
    return at::layer_norm(x, {x.size(-1)}, w, b, eps);
  }
  at::Tensor& quick_gelu_(at::Tensor& x) const override { return x.mul_(at::sigmoid(1.702 * x)); }
  at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const override {
    return (act == GateActivation::Silu ? at::silu(gate) : at::gelu(gate, "tanh")).mul_(up);
  }
  std::unique_ptr<StepAttention> plan_attention(const QueryLayout& q, const at::Tensor& key_positions, const at::Tensor& key_segments,
                                                std::optional<int64_t> window, int64_t /*heads*/, double logit_softcap) const override {
    std::map<int64_t, std::vector<int64_t>> by_state;
    const auto roots = q.roots.contiguous();
    for (int64_t i = 0; i < roots.size(0); ++i) by_state[roots.data_ptr<int64_t>()[i]].push_back(i);
    std::vector<MaskedAttention::Group> groups;
    if (by_state.size() == 1) {
      auto visible = visibility_mask(q.positions, q.segments, q.parents, q.roots, key_positions, key_segments, window);
      groups.push_back({at::Tensor(), at::Tensor(), visible.to(device_)});
      return std::make_unique<MaskedAttention>(std::move(groups), logit_softcap);
    }
    // Each state's mask over the keys of its own segments only: one dense mask over a step of
    // several long states grows with the square of the step and was built on the CPU; on an H100
    // it took most of the step's time (docs/gpu.md).
    for (const auto& [root, rows] : by_state) {
      auto queries = at::tensor(at::ArrayRef<int64_t>(rows), at::TensorOptions().dtype(at::kLong));
      auto seg = q.segments.index_select(0, queries), parent = q.parents.index_select(0, queries), state = q.roots.index_select(0, queries);
      auto candidates = at::isin(key_segments, at::cat({seg, parent, state})).nonzero().squeeze(1);
      auto sub = visibility_mask(q.positions.index_select(0, queries), seg, parent, state, key_positions.index_select(0, candidates),
                                 key_segments.index_select(0, candidates), window);
      auto seen = sub.any(0).nonzero().squeeze(1);
      groups.push_back({queries.to(device_), candidates.index_select(0, seen).to(device_), sub.index_select(1, seen).to(device_)});
    }
    return std::make_unique<MaskedAttention>(std::move(groups), logit_softcap);
  }

 private:
  // The switch that keeps reductions whole covers bf16 and fp16 GEMMs: theirs are the few-row forms' to choose.
  std::shared_ptr<FewRowsGemm> few_rows_for(const at::Tensor& weight) const {
    const auto dtype = weight.scalar_type();
    return dtype == at::kBFloat16 || dtype == at::kHalf ? few_rows_ : nullptr;
  }
  at::Device device_;
  Quantization quantization_;
  std::shared_ptr<FewRowsGemm> few_rows_;  // batch-invariant on CUDA only
};

}  // namespace

// cuBLAS splits a GEMM's reduction along K when its rows are few, so a row's bits depend on how many rows
// share its call: a cached question (its own few rows) answered otherwise than a cold one (the state's
// thousand) on an H200 (bench/gpu/results/h200-2026-11-28-row-invariance). Kernels that do not split gave a
// row the same bits at every row count measured. ATen's switch turns split-K off for bf16 and fp16 on the
// cuBLASLt path only (its plain cuBLAS path refuses it), hence cuBLASLt preferred. The switch is the
// process's: an engine process runs one engine. fp8 (_scaled_mm) is not covered; the window's invariance
// step checks bf16.
void keep_gemm_reductions_whole(const at::Device& device) {
#if TQ_CUDA && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10))
  if (!device.is_cuda()) return;
  auto& context = at::globalContext();
  context.setBlasPreferredBackend(at::BlasBackend::Cublaslt);
  context.setAllowBF16ReductionCuBLAS(/*allow_reduced_precision=*/false, /*allow_splitk=*/false);
  context.setAllowFP16ReductionCuBLAS(/*allow_reduced_precision=*/false, /*allow_splitk=*/false);
#else
  (void)device;
#endif
}

std::unique_ptr<LayerKernels> aten_layer_kernels(at::Device device, Quantization quantization, bool batch_invariant, bool own_gemm) {
  if (batch_invariant) keep_gemm_reductions_whole(device);
  auto timer = batch_invariant && device.is_cuda() ? cuda_gemm_timer() : nullptr;
  return std::make_unique<AtenLayerKernels>(device, quantization, timer ? std::make_shared<FewRowsGemm>(std::move(timer), own_gemm) : nullptr);
}

}  // namespace tq
