#include "kernels/fused/fused_layer_kernels.h"

#include <stdexcept>
#include <string>

#include "kernels/fused/row_kernels_host.h"
#if TQ_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/launch_check.h"
#include "kernels/cuda/row_kernels.h"
#endif

namespace tq {
namespace {

bool is_bf16(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16; }
const float* floats_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// Runs a row kernel where its tensors are: the CUDA launch, or its host form.
#if TQ_CUDA
template <typename Args>
void run(const char* step, cudaError_t (*launch)(const Args&, cudaStream_t), void (*host)(const Args&), const Args& args, const at::Device& device) {
  if (!device.is_cuda()) return host(args);
  const auto stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  cuda::check_launch(step, [&] { return launch(args, stream); });
}
#define TQ_ROWS(kernel, args, device) run("fused row kernel " #kernel, cuda::launch_##kernel, rows::kernel##_host, args, device)
#else
#define TQ_ROWS(kernel, args, device) rows::kernel##_host(args)
#endif

class FusedLayerKernels : public LayerKernels, public FusedRowOps {
 public:
  explicit FusedLayerKernels(std::unique_ptr<LayerKernels> gemms) : gemms_(std::move(gemms)) {}
  std::string name() const override { return "fused"; }
  at::Device device() const override { return gemms_->device(); }
  std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const override { return gemms_->linear(weight, bias); }
  std::unique_ptr<Linear> unquantized_linear(const at::Tensor& weight) const override { return gemms_->unquantized_linear(weight); }
  std::unique_ptr<StepAttention> plan_attention(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                                                std::optional<int64_t> window, int64_t heads, double logit_softcap) const override {
    return gemms_->plan_attention(queries, key_positions, key_segments, window, heads, logit_softcap);
  }
  const FusedRowOps* fused_rows() const override { return this; }
  const FewRowsGemm* few_rows_gemm() const override { return gemms_->few_rows_gemm(); }

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, at::ScalarType out_dtype) const override {
    auto rows = x.to(at::kFloat).contiguous();  // read, not written (no addend)
    return add_rms_norm(rows, at::Tensor(), w, eps, out_dtype).view(x.sizes());
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                  at::ScalarType out_dtype) const override {
    const auto heads = x.to(at::kFloat).contiguous();  // [T, heads, dim]
    at::Tensor none;
    StepKeys no_keys;
    return qk_norm_rope_store(heads.view({heads.size(0), -1}), heads.size(1), 0, none, none, 0, cos, sin, positions, none, none, none, out_dtype,
                              no_keys);
  }
  at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const override {
    return gated_mul_halves(at::cat({gate.view({-1, gate.size(-1)}), up.view({-1, up.size(-1)})}, 1), act).view(gate.sizes());
  }
  at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) const override {
    return gemms_->layer_norm(x, w, b, eps);
  }
  at::Tensor& quick_gelu_(at::Tensor& x) const override { return gemms_->quick_gelu_(x); }

  at::Tensor add_rms_norm(at::Tensor& residual, const at::Tensor& addend, const at::Tensor& weight, double eps,
                          at::ScalarType out_dtype) const override {
    TORCH_CHECK(residual.scalar_type() == at::kFloat && residual.is_contiguous(), "add_rms_norm: a contiguous fp32 residual");
    const int64_t n = residual.size(-1), rows = residual.numel() / n;
    const auto add = addend.defined() ? addend.contiguous() : addend;
    const auto w = weight.to(at::kFloat).contiguous();
    auto out = at::empty(residual.sizes(), residual.options().dtype(out_dtype));
    rows::AddRmsNormArgs args{static_cast<int>(rows), static_cast<int>(n), residual.data_ptr<float>(), add.defined() ? add.data_ptr() : nullptr,
                              add.defined() && is_bf16(add), n, w.data_ptr<float>(), static_cast<float>(eps), out.data_ptr(), out_dtype == at::kBFloat16};
    TQ_ROWS(add_rms_norm, args, residual.device());
    return out;
  }

  at::Tensor gated_mul_halves(const at::Tensor& gate_up, GateActivation act) const override {
    const auto gu = gate_up.contiguous();
    const int64_t n = gu.size(1) / 2;
    auto out = at::empty({gu.size(0), n}, gu.options());
    const char* base = static_cast<const char*>(gu.data_ptr());
    rows::GatedMulArgs args{static_cast<int>(gu.size(0)), static_cast<int>(n), base, base + n * gu.element_size(), gu.size(1), is_bf16(gu),
                            act == GateActivation::GeluTanh, out.data_ptr()};
    TQ_ROWS(gated_mul, args, gu.device());
    return out;
  }

  at::Tensor qk_norm_rope_store(const at::Tensor& qkv, int64_t heads, int64_t kv_heads, const at::Tensor& q_norm, const at::Tensor& k_norm,
                                double eps, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& rope_rows, at::Tensor& key_cache,
                                at::Tensor& value_cache, const at::Tensor& slots, at::ScalarType out_dtype, StepKeys& step) const override {
    TORCH_CHECK((qkv.scalar_type() == at::kFloat || is_bf16(qkv)) && qkv.stride(1) == 1, "qk_norm_rope_store: fp32 or bf16 qkv rows");
    const int64_t dim = qkv.size(1) / (heads + 2 * kv_heads), tokens = qkv.size(0);
    if (kv_heads > 0) TORCH_CHECK(key_cache.scalar_type() == out_dtype && value_cache.scalar_type() == out_dtype, "the KV cache in the compute dtype");
    const bool to_step = kv_heads > 0 && step.k.defined();
    for (const auto* t : {&step.k, &step.v})
      TORCH_CHECK(!to_step || (t->is_contiguous() && t->scalar_type() == out_dtype && t->dim() == 3 && t->size(0) >= tokens && t->size(1) == kv_heads &&
                               t->size(2) == dim),
                  "qk_norm_rope_store: the step's keys [at least its rows, kv_heads, dim] in the compute dtype");
    auto q = at::empty({tokens, heads, dim}, qkv.options().dtype(out_dtype));
    const auto qn = q_norm.defined() ? q_norm.contiguous() : q_norm, kn = k_norm.defined() ? k_norm.contiguous() : k_norm;
    const auto c = cos.defined() ? cos.contiguous() : cos, s = sin.defined() ? sin.contiguous() : sin;
    const auto r = rope_rows.defined() ? rope_rows.to(at::kLong).contiguous() : rope_rows, sl = slots.defined() ? slots.contiguous() : slots;
    rows::QkNormRopeArgs args{static_cast<int>(tokens), static_cast<int>(heads), static_cast<int>(kv_heads), static_cast<int>(dim),
                              qkv.data_ptr(), is_bf16(qkv), qkv.stride(0), floats_or_null(qn), floats_or_null(kn), static_cast<float>(eps),
                              floats_or_null(c), floats_or_null(s), r.defined() ? r.data_ptr<int64_t>() : nullptr, q.data_ptr(),
                              kv_heads > 0 ? key_cache.data_ptr() : nullptr, kv_heads > 0 ? value_cache.data_ptr() : nullptr,
                              sl.defined() ? sl.data_ptr<int64_t>() : nullptr, to_step ? step.k.data_ptr() : nullptr,
                              to_step ? step.v.data_ptr() : nullptr, out_dtype == at::kBFloat16};
    TQ_ROWS(qk_norm_rope, args, qkv.device());
    return q;
  }

 private:
  std::unique_ptr<LayerKernels> gemms_;
};

}  // namespace

std::unique_ptr<LayerKernels> fused_layer_kernels(std::unique_ptr<LayerKernels> gemms) { return std::make_unique<FusedLayerKernels>(std::move(gemms)); }

}  // namespace tq
