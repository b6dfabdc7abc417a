#include "kernels/aten/fp8_linear.h"

#include <stdexcept>
#include <string>

#if TQ_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/fp8_gemm.h"
#include "kernels/cuda/launch_check.h"
#endif

namespace tq {

#if TQ_CUDA
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

cudaStream_t stream_of(at::Device device) { return c10::cuda::getCurrentCUDAStream(device.index()).stream(); }

// rows of x (fp32 or bf16, on the device) as e4m3 rows padded to fp8_padded_k, and their scales.
void quantize_rows(const at::Tensor& x, at::Tensor& q, at::Tensor& scale) {
  const cuda::Fp8QuantizeArgs args{x.data_ptr(), x.scalar_type() == at::kBFloat16, x.size(0), x.size(1), x.size(1),
                                   q.data_ptr<uint8_t>(), q.size(1), scale.data_ptr<float>()};
  cuda::check_launch("fp8 quantize kernel", [&] { return cuda::launch_fp8_quantize(args, stream_of(x.device())); });
}

class Fp8Linear : public Linear {
 public:
  Fp8Linear(const at::Tensor& weight, const at::Tensor& bias, at::Device device) : in_(weight.size(1)), out_(weight.size(0)) {
    const c10::cuda::CUDAGuard guard(device);
    int major = 0, minor = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c10::cuda::current_device()), "compute capability");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c10::cuda::current_device()), "compute capability");
    if (major * 10 + minor < 89)
      throw std::invalid_argument("fp8 weights need a GPU of compute capability 8.9 or newer (Ada, Hopper); this one is " +
                                  std::to_string(major) + "." + std::to_string(minor));
    // One copy of this matrix on the device at a time, freed once quantized.
    const auto w = weight.to(device).contiguous();
    TORCH_CHECK(w.scalar_type() == at::kFloat || w.scalar_type() == at::kBFloat16, "fp8 weights from fp32 or bf16, got ", w.scalar_type());
    weights_ = at::empty({out_, cuda::fp8_padded_k(in_)}, w.options().dtype(at::kByte));
    w_scale_ = at::empty({out_}, w.options().dtype(at::kFloat));
    quantize_rows(w, weights_, w_scale_);
    if (bias.defined()) bias_ = bias.to(device, at::kFloat).reshape({out_}).contiguous();
  }

  at::Tensor operator()(const at::Tensor& x, at::ScalarType out_dtype) const override {
    TORCH_CHECK(out_dtype == at::kFloat || out_dtype == at::kBFloat16, "Fp8Linear: fp32 or bf16 output, got ", out_dtype);
    auto out = at::empty({x.size(0), out_}, x.options().dtype(out_dtype));
    run(x, out, /*accumulate=*/false);
    return out;
  }

  void add_into(const at::Tensor& x, at::Tensor& residual) const override {
    TORCH_CHECK(residual.scalar_type() == at::kFloat && residual.is_contiguous() && residual.size(0) == x.size(0) && residual.size(1) == out_,
                "Fp8Linear::add_into: residual ", residual.sizes());
    run(x, residual, /*accumulate=*/true);
  }

  int64_t bytes() const override { return weights_.nbytes() + w_scale_.nbytes() + (bias_.defined() ? bias_.nbytes() : 0); }

 private:
  void run(const at::Tensor& x, at::Tensor& out, bool accumulate) const {
    TORCH_CHECK(x.dim() == 2 && x.size(1) == in_ && x.device() == weights_.device() &&
                    (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
                "Fp8Linear: input ", x.sizes(), " ", x.scalar_type(), " for weights [", out_, ", ", in_, "]");
    const c10::cuda::CUDAGuard guard(x.device());
    const auto input = x.contiguous();
    auto q = at::empty({input.size(0), weights_.size(1)}, weights_.options());
    auto scale = at::empty({input.size(0)}, w_scale_.options());
    quantize_rows(input, q, scale);
    const cuda::Fp8GemmArgs args{q.data_ptr<uint8_t>(), scale.data_ptr<float>(), weights_.data_ptr<uint8_t>(), w_scale_.data_ptr<float>(),
                                 bias_.defined() ? bias_.data_ptr<float>() : nullptr, out.data_ptr(), out.size(1), input.size(0), out_,
                                 weights_.size(1), accumulate, out.scalar_type() == at::kBFloat16};
    cuda::check_launch("fp8 GEMM kernel", [&] { return cuda::launch_fp8_gemm(args, stream_of(x.device())); });
  }

  int64_t in_, out_;
  at::Tensor weights_;  // [out, fp8_padded_k(in)] e4m3 bytes
  at::Tensor w_scale_, bias_;
};

}  // namespace

std::unique_ptr<Linear> fp8_linear(const at::Tensor& weight, const at::Tensor& bias, at::Device device) {
  if (!device.is_cuda()) throw std::invalid_argument("fp8 weights run on CUDA only (the H100's fp8 tensor cores); on the CPU use int8");
  return std::make_unique<Fp8Linear>(weight, bias, device);
}
#else
std::unique_ptr<Linear> fp8_linear(const at::Tensor&, const at::Tensor&, at::Device) {
  throw std::invalid_argument("fp8 weights run on CUDA only (the H100's fp8 tensor cores): this build has no CUDA; on the CPU use int8");
}
#endif

}  // namespace tq
