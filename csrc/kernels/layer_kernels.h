// The arithmetic the transformer is written in, one implementation per kind
// of device: the engine's own CPU kernels (kernels/cpu/), and ATen's
// device-generic ops (kernels/aten/), which run on CUDA (cuBLAS GEMMs, SDPA
// attention) and, for checking that path, on the CPU too. The transformer
// (model/transformer.h) only says which operation comes next.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "batch/visibility.h"

namespace tq {

class FewRowsGemm;  // kernels/aten/few_rows_gemm.h

// The gated MLP's activation: silu (SwiGLU), or gelu_pytorch_tanh (Gemma).
enum class GateActivation { Silu, GeluTanh };

// x W^T (+ b), with its weights prepared once in whatever form the device reads best.
class Linear {
 public:
  virtual ~Linear() = default;
  // x: [M, in] in the compute dtype. Returns [M, out] in out_dtype.
  virtual at::Tensor operator()(const at::Tensor& x, at::ScalarType out_dtype) const = 0;
  // residual += x W^T, residual [M, out] fp32.
  virtual void add_into(const at::Tensor& x, at::Tensor& residual) const = 0;
  // The memory its weights (and bias, scales) take, as prepared.
  virtual int64_t bytes() const = 0;
  // The dtype its product is rounded to before any conversion to out_dtype: asked for in it, the output costs no
  // conversion and carries the same values. fp32 unless the GEMM itself rounds (ATen's bf16 GEMM without a bias).
  virtual at::ScalarType natural_dtype() const { return at::kFloat; }
};

// The step's own keys and values where the layer wrote them beside the KV cache's store (FusedRowOps::qk_norm_rope_store):
// [rows, kv_heads, dim] each in the compute dtype, row i the key and value of the step's query row i; rows past the
// step's are never read. Undefined where the layer wrote the store alone.
struct StepKeys {
  at::Tensor k, v;
};

// One step's attention, planned once from the step's layout and run at every layer.
class StepAttention {
 public:
  virtual ~StepAttention() = default;
  // q: [Tq, heads, dim]; k, v: [Tk, kv_heads, dim], all in the compute dtype. Returns [Tq, heads, dim].
  virtual at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const = 0;
  // The same over keys and values where they lie in the KV cache: k_store, v_store [slots, kv_heads, dim], the
  // step's keys at key_slots (the plan's QueryLayout::key_slots, on the device). This gathers the step's copy;
  // the cascade reads each tier's keys from the store itself, in place where it can, with no step copy between (a
  // copy of every key a layer reads: on a GPU the most frequent kernel, docs/gpu.md).
  // `written`: the step's own keys as the layer wrote them, where step_key_rows() asked for them.
  virtual at::Tensor over_store(const at::Tensor& q, const at::Tensor& k_store, const at::Tensor& v_store, const at::Tensor& key_slots,
                                const StepKeys& /*written*/ = {}) const {
    return (*this)(q, k_store.index_select(0, key_slots), v_store.index_select(0, key_slots));
  }
  // The rows of StepKeys this plan reads (the cascade's tiers whose keys are the step's own: read there, not gathered
  // from the store); 0 where it reads none, and the layer need not write them.
  virtual int64_t step_key_rows() const { return 0; }
  // The arrays its launches read that it leaves on the host when planned, in a fixed order: the step moves them to
  // the device with its own in one copy (runner/step_inputs.h), before the plan runs. Empty where the plan has
  // placed its arrays itself.
  virtual std::vector<at::Tensor*> arrays() { return {}; }
  // For CUDA graphs (runner/step_graphs.h). The host values its launches take (sizes, flags, the
  // lengths of the arrays they read): two plans with equal ones launch alike, so a graph captured
  // with one replays the other once the other's arrays are copied into the first's (in the step's one
  // copy) and refill_from has taken what else it holds on the host. Empty where the plan is not in
  // such a fixed shape (batch/fixed_cascade.h): its step runs without a graph.
  virtual std::vector<int64_t> launch_shape() const { return {}; }
  virtual void refill_from(const StepAttention& /*other*/) { throw std::logic_error("refill_from: a plan without a fixed shape"); }
};

// The fused forward's row ops (kernels/fused/): one launch each where the ops of LayerKernels take
// one per link of a chain. Only the fused kernels have them: the transformer asks fused_rows().
class FusedRowOps {
 public:
  virtual ~FusedRowOps() = default;
  // residual [T, n] fp32 += addend's values (fp32 adds), then RMSNorm of the residual by weight
  // (fp32 [n]); returns it normed, in out_dtype.
  virtual at::Tensor add_rms_norm(at::Tensor& residual, const at::Tensor& addend, const at::Tensor& weight, double eps,
                                  at::ScalarType out_dtype) const = 0;
  // act(gate) * up over the halves of gate_up [T, 2n] (one GEMM's output, gate first), in its dtype.
  virtual at::Tensor gated_mul_halves(const at::Tensor& gate_up, GateActivation act) const = 0;
  // qkv: [T, (heads + 2 kv_heads) dim] fp32 or bf16 (read widened to fp32). Per head, q and k RMSNormed by q_norm and k_norm
  // ([dim] fp32; undefined: none), turned by RoPE at rows `rope_rows` of cos and sin (undefined:
  // none); k and v stored at `slots` of key_cache and value_cache ([slots, kv_heads, dim] in
  // out_dtype), and where `step` holds arrays, into its rows 0..T-1 too (the same values). Returns q [T, heads, dim] in
  // out_dtype.
  virtual at::Tensor qk_norm_rope_store(const at::Tensor& qkv, int64_t heads, int64_t kv_heads, const at::Tensor& q_norm,
                                        const at::Tensor& k_norm, double eps, const at::Tensor& cos, const at::Tensor& sin,
                                        const at::Tensor& rope_rows, at::Tensor& key_cache, at::Tensor& value_cache, const at::Tensor& slots,
                                        at::ScalarType out_dtype, StepKeys& step) const = 0;
};

class LayerKernels {
 public:
  virtual ~LayerKernels() = default;
  virtual std::string name() const = 0;  // for info(): "avx2", "avx512", "generic", "aten"
  virtual at::Device device() const = 0;
  // weight: [out, in] in the compute dtype on the CPU; bias: [out] fp32 or undefined.
  virtual std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const = 0;
  // The same, never quantized: a mixture of experts' router (int8 or fp8 rounding would move its choice of
  // experts; llama.cpp and vLLM keep it unquantized too).
  virtual std::unique_ptr<Linear> unquantized_linear(const at::Tensor& weight) const = 0;
  // x / sqrt(mean(x^2) + eps) * weight over the last dimension; x fp32.
  virtual at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, at::ScalarType out_dtype) const = 0;
  // Rotate-half RoPE of x [T, heads, dim] fp32 at positions [T]; cos, sin [max_positions, dim] fp32.
  virtual at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                          at::ScalarType out_dtype) const = 0;
  // act(gate) * up, in gate's dtype.
  virtual at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const = 0;
  // The vision tower's (Qwen2-VL): (x - mean) / sqrt(var + eps) * weight + bias over the last dimension, x fp32
  // [rows, n], returned fp32; and x * sigmoid(1.702 x) (QuickGELU) in place, x fp32.
  virtual at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) const = 0;
  virtual at::Tensor& quick_gelu_(at::Tensor& x) const = 0;
  // logit_softcap > 0: scores are soft-capped, cap * tanh(score / cap), before the mask and softmax (Gemma).
  virtual std::unique_ptr<StepAttention> plan_attention(const QueryLayout& queries, const at::Tensor& key_positions,
                                                        const at::Tensor& key_segments, std::optional<int64_t> window,
                                                        int64_t heads, double logit_softcap = 0) const = 0;
  // Attention in both directions within segments (a vision tower's: the whole image, or one window): each row sees
  // every row of its own segment. segments: [n] int64, each segment's rows one run. The causal plan_attention
  // computes it when every row sits at position 0 and sees up to its run's end; kernels whose plan needs
  // causal runs by position (the cascade's) hand it to the kernels under them.
  virtual std::unique_ptr<StepAttention> plan_segment_attention(const at::Tensor& segments, int64_t heads) const {
    const auto seg = segments.contiguous();
    const int64_t n = seg.size(0);
    const int64_t* s = seg.data_ptr<int64_t>();
    std::vector<int64_t> key_end(n);
    for (int64_t end = n, i = n - 1; i >= 0; --i) {
      if (i + 1 < n && s[i + 1] != s[i]) end = i + 1;
      key_end[i] = end;
    }
    const auto zeros = at::zeros({n}, at::kLong);
    return plan_attention({zeros, seg, seg, seg, std::move(key_end), /*key_slots=*/at::Tensor()}, zeros, seg, std::nullopt, heads);
  }
  // The fused row ops, where these kernels have them (kernels/fused/); null elsewhere.
  virtual const FusedRowOps* fused_rows() const { return nullptr; }
  // The few-row GEMM's forms and what they chose (kernels/aten/few_rows_gemm.h), where these kernels run it (ATen's,
  // batch-invariant on CUDA); null elsewhere.
  virtual const FewRowsGemm* few_rows_gemm() const { return nullptr; }
};

}  // namespace tq
