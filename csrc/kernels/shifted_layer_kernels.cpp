#include "kernels/shifted_layer_kernels.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tq {
namespace {

constexpr int64_t kLine = 64;

// t's values in new contiguous storage that starts `shift` bytes past a 64-byte boundary.
at::Tensor shifted(const at::Tensor& t, int64_t shift) {
  const auto c = t.contiguous();
  auto storage = at::empty({static_cast<int64_t>(c.nbytes()) + 2 * kLine}, c.options().dtype(at::kByte));
  const auto base = reinterpret_cast<uintptr_t>(storage.data_ptr());
  char* place = reinterpret_cast<char*>((base + kLine - 1) / kLine * kLine) + shift;
  std::memcpy(place, c.data_ptr(), c.nbytes());
  return at::from_blob(place, c.sizes(), [storage](void*) {}, c.options());  // storage lives as long as the view
}

class ShiftedLinear : public Linear {
 public:
  ShiftedLinear(std::unique_ptr<Linear> inner, int64_t shift) : inner_(std::move(inner)), shift_(shift) {}
  at::Tensor operator()(const at::Tensor& x, at::ScalarType out_dtype) const override { return (*inner_)(shifted(x, shift_), out_dtype); }
  void add_into(const at::Tensor& x, at::Tensor& residual) const override {
    auto moved = shifted(residual, shift_);
    inner_->add_into(shifted(x, shift_), moved);
    residual.copy_(moved);
  }
  int64_t bytes() const override { return inner_->bytes(); }

 private:
  std::unique_ptr<Linear> inner_;
  int64_t shift_;
};

class ShiftedAttention : public StepAttention {
 public:
  ShiftedAttention(std::unique_ptr<StepAttention> inner, int64_t shift) : inner_(std::move(inner)), shift_(shift) {}
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const override {
    return (*inner_)(shifted(q, shift_), shifted(k, shift_), shifted(v, shift_));
  }

 private:
  std::unique_ptr<StepAttention> inner_;
  int64_t shift_;
};

// RoPE's cos and sin tables stay where they are: a row's place in them moves with its position anyway.
class ShiftedLayerKernels : public LayerKernels {
 public:
  ShiftedLayerKernels(std::unique_ptr<LayerKernels> inner, int64_t shift) : inner_(std::move(inner)), shift_(shift) {}
  std::string name() const override { return inner_->name(); }
  at::Device device() const override { return inner_->device(); }
  std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const override {
    return std::make_unique<ShiftedLinear>(inner_->linear(weight, bias), shift_);
  }
  std::unique_ptr<Linear> unquantized_linear(const at::Tensor& weight) const override {
    return std::make_unique<ShiftedLinear>(inner_->unquantized_linear(weight), shift_);
  }
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, at::ScalarType out_dtype) const override {
    return inner_->rms_norm(shifted(x, shift_), shifted(weight, shift_), eps, out_dtype);
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                  at::ScalarType out_dtype) const override {
    return inner_->rope(shifted(x, shift_), cos, sin, positions, out_dtype);
  }
  at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const override {
    auto moved = shifted(gate, shift_);
    return inner_->gated_mul(moved, shifted(up, shift_), act);
  }
  at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) const override {
    return inner_->layer_norm(shifted(x, shift_), shifted(w, shift_), shifted(b, shift_), eps);
  }
  at::Tensor& quick_gelu_(at::Tensor& x) const override {
    x = shifted(x, shift_);
    return inner_->quick_gelu_(x);
  }
  std::unique_ptr<StepAttention> plan_attention(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                                                std::optional<int64_t> window, int64_t heads, double logit_softcap) const override {
    return std::make_unique<ShiftedAttention>(inner_->plan_attention(queries, key_positions, key_segments, window, heads, logit_softcap), shift_);
  }

 private:
  std::unique_ptr<LayerKernels> inner_;
  int64_t shift_;
};

}  // namespace

void check_buffer_shift(int64_t shift) {
  if (shift < 0 || shift > kLine || shift % 4 != 0)
    throw std::invalid_argument("bufferShift must be a multiple of 4 bytes from 0 to 64, got " + std::to_string(shift));
}

std::unique_ptr<LayerKernels> shifted_layer_kernels(std::unique_ptr<LayerKernels> kernels, int64_t shift) {
  check_buffer_shift(shift);
  if (shift == 0) return kernels;
  return std::make_unique<ShiftedLayerKernels>(std::move(kernels), shift);
}

}  // namespace tq
