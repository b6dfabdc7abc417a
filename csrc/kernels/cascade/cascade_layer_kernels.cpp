#include "kernels/cascade/cascade_layer_kernels.h"

#include <stdexcept>
#include <vector>

#include "batch/cascade_plan.h"
#include "kernels/cascade/attention_merge.h"
#include "kernels/cascade/partial_attention.h"

namespace tq {
namespace {

// The implementation for a device: the reference on the CPU; on CUDA the attention kernels in
// libtorch, or ATen's ops where scores are soft-capped (FlashAttention-2 cannot).
std::unique_ptr<PartialAttention> partial_attention_for(at::Device device, at::ScalarType dtype, double softcap) {
  if (device.is_cpu()) return reference_partial_attention(softcap);
  if (softcap > 0) return aten_partial_attention(softcap);
#if TQ_CUDA
  return flash_partial_attention(dtype);
#else
  (void)dtype;
  throw std::invalid_argument("a cascade off the CPU needs a CUDA build");
#endif
}

// A step's cascade: the plan, each level's arrays and the merge's on the device, made once.
class CascadeAttention : public StepAttention {
 public:
  CascadeAttention(CascadePlan plan, std::unique_ptr<PartialAttention> partial, at::Device device)
      : plan_(std::move(plan)), partial_(std::move(partial)), merge_(prepare_merge(plan_, device)) {
    for (const auto& level : plan_.levels) levels_.push_back(partial_->prepare(level, device));
  }
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const override {
    std::vector<PartialResult> parts;
    for (const auto& level : levels_) parts.push_back((*partial_)(q, k, v, level));
    return merge_attention(merge_, parts, q.scalar_type());
  }

 private:
  CascadePlan plan_;  // levels_ point into it
  std::unique_ptr<PartialAttention> partial_;
  DeviceMerge merge_;
  std::vector<DeviceLevel> levels_;
};

class CascadeLayerKernels : public LayerKernels {
 public:
  CascadeLayerKernels(std::unique_ptr<LayerKernels> inner, at::ScalarType dtype) : inner_(std::move(inner)), dtype_(dtype) {}
  std::string name() const override { return inner_->name(); }
  at::Device device() const override { return inner_->device(); }
  std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const override { return inner_->linear(weight, bias); }
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, at::ScalarType out_dtype) const override {
    return inner_->rms_norm(x, weight, eps, out_dtype);
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                  at::ScalarType out_dtype) const override {
    return inner_->rope(x, cos, sin, positions, out_dtype);
  }
  at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const override { return inner_->gated_mul(gate, up, act); }
  const FusedRowOps* fused_rows() const override { return inner_->fused_rows(); }
  std::unique_ptr<StepAttention> plan_attention(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                                                std::optional<int64_t> window, int64_t /*heads*/, double logit_softcap) const override {
    return std::make_unique<CascadeAttention>(plan_cascade(queries, key_positions, key_segments, window),
                                              partial_attention_for(device(), dtype_, logit_softcap), device());
  }

 private:
  std::unique_ptr<LayerKernels> inner_;
  at::ScalarType dtype_;
};

}  // namespace

std::unique_ptr<LayerKernels> cascade_layer_kernels(std::unique_ptr<LayerKernels> kernels, at::ScalarType dtype) {
  return std::make_unique<CascadeLayerKernels>(std::move(kernels), dtype);
}

}  // namespace tq
