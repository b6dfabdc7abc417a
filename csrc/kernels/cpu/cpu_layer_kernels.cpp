#include "kernels/cpu/cpu_layer_kernels.h"

#include <cstdlib>
#include <string>

#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/gemm/gemm_kernels.h"
#include "kernels/cpu/gemm/int8_linear.h"
#include "kernels/cpu/gemm/invariant_gemm.h"
#if TQ_ONEDNN
#include "kernels/cpu/gemm/onednn.h"
#endif
#include "kernels/cpu/gemm/packed_linear.h"
#include "kernels/cpu/rows/rowwise.h"
#include "kernels/cpu/rows/swiglu.h"

namespace tq {
namespace {

// int8 on AMX tiles where the level allows AVX-512 and the CPU has AMX-INT8; on vpdpbusd where it has
// VNNI; on vpmaddubsw where the level allows AVX2; else the generic loop. All give the same bits (int8_gemm.h).
// A test instrument: TQ_INT8_AMX_MODEL=1 runs the AMX kernel on its model of the tiles (amx_tiles.h), on any CPU,
// so that the golden answers check the AMX path end to end where there is no AMX (test/engine/golden.test.ts).
int8_gemm::Kernel int8_kernel(Isa isa) {
  if (const char* model = std::getenv("TQ_INT8_AMX_MODEL"); model && std::string(model) == "1") return int8_gemm::amx_model_kernel();
  if (isa >= Isa::Avx512 && int8_gemm::cpu_has_amx_int8()) return int8_gemm::amx_kernel();
  if (isa >= Isa::Avx512 && int8_gemm::cpu_has_vnni()) return int8_gemm::vnni_kernel();
  if (isa >= Isa::Avx2 && int8_gemm::cpu_has_avx2()) return int8_gemm::avx2_kernel();
  return int8_gemm::generic_kernel();
}

class CpuStepAttention : public StepAttention {
 public:
  CpuStepAttention(AttentionPlan plan, bool invariant, Isa isa, double softcap)
      : plan_(std::move(plan)), invariant_(invariant), isa_(isa), softcap_(softcap) {}
  // A step's plan lives for the step's forward: what its attention grew is trimmed once, here.
  ~CpuStepAttention() override { trim_attention_buffers(); }
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const override {
    return attention(q, k, v, plan_, invariant_, isa_, softcap_);
  }
  // The keys and values read where they lie in the cache, each item's rows gathered on its own thread.
  at::Tensor over_store(const at::Tensor& q, const at::Tensor& k_store, const at::Tensor& v_store, const at::Tensor& key_slots,
                        const StepKeys&) const override {
    return attention(q, k_store, v_store, plan_, invariant_, isa_, softcap_, key_slots);
  }

 private:
  AttentionPlan plan_;
  bool invariant_;
  Isa isa_;
  double softcap_;
};

class CpuLayerKernels : public LayerKernels {
 public:
  CpuLayerKernels(bool invariant, Isa isa, bool bf16, bool int8, bool native)
      : invariant_(invariant), isa_(isa), bf16_(bf16), int8_(int8), native_(native) {}
  std::string name() const override { return isa_name(isa_); }
  at::Device device() const override { return at::kCPU; }
  std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const override {
    if (int8_) return std::make_unique<Int8Linear>(weight, bias, int8_kernel(isa_));
    return std::make_unique<PackedLinear>(weight, bias, invariant_, isa_, native_);
  }
  std::unique_ptr<Linear> unquantized_linear(const at::Tensor& weight) const override {
    return std::make_unique<PackedLinear>(weight, at::Tensor(), invariant_, isa_, native_);
  }
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, at::ScalarType out_dtype) const override {
    return tq::rms_norm(x, w, eps, out_dtype);
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                  at::ScalarType out_dtype) const override {
    return tq::rope(x, cos, sin, positions, out_dtype);
  }
  at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const override { return gated_mul_(gate, up, act); }
  at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) const override {
    return tq::layer_norm(x, w, b, eps);
  }
  at::Tensor& quick_gelu_(at::Tensor& x) const override { return tq::quick_gelu_(x); }
  std::unique_ptr<StepAttention> plan_attention(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                                                std::optional<int64_t> window, int64_t heads, double logit_softcap) const override {
    // The invariant bf16 mix adds keys in pairs (key_pairs.h), at every level.
    const bool paired = invariant_ && bf16_;
    return std::make_unique<CpuStepAttention>(tq::plan_attention(queries, key_positions, key_segments, window, heads, paired, invariant_),
                                              invariant_, isa_, logit_softcap);
  }

 private:
  bool invariant_;
  Isa isa_;
  bool bf16_;
  bool int8_;
  bool native_;
};

}  // namespace

std::unique_ptr<LayerKernels> cpu_layer_kernels(bool invariant, Isa isa, at::ScalarType dtype, Quantization quantization, bool native) {
  if (quantization == Quantization::Fp8) throw std::invalid_argument("fp8 weights run on CUDA only (the H100's fp8 tensor cores); on the CPU use int8");
  const bool bf16 = dtype == at::kBFloat16;
  if (native && !(invariant && bf16 && quantization == Quantization::None))
    throw std::invalid_argument("the native arithmetic is the invariant bf16 kernels' (no quantization)");
  return std::make_unique<CpuLayerKernels>(invariant, invariant_gemm::level_for(isa, bf16), bf16, quantization == Quantization::Int8, native);
}

const char* int8_kernel_name(Isa isa) { return int8_kernel(isa).name; }

bool native_arithmetic_available() { return gemm::native_bf16_available(); }

CpuKernelMemory cpu_kernel_memory() {
  return {attention_buffer_bytes(), attention_buffer_kept_bytes(), cached_primitives(), max_cached_primitives()};
}

bool cpu_bf16_without_invariance() {
#if TQ_ONEDNN
  return onednn::bf16_matmul_supported();
#else
  return false;
#endif
}

}  // namespace tq
