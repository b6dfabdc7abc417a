// The decoder-only transformer of every supported text family (Llama, Mistral,
// Qwen2, Qwen3, Gemma 3, Phi-3, OLMo 2, SmolLM3; the mixtures of experts
// Qwen3-MoE, Mixtral, Qwen2-MoE, model/moe.h) and Qwen2-VL's text model:
// RMSNorm before, after or around each sublayer, GQA attention with
// rotate-half RoPE (scaled, partial, per-layer tables, left out of some
// layers, or M-RoPE's three position streams), optional QKV bias (Qwen2) and
// q/k norms (per head or over the projection), a gated MLP (SwiGLU or
// GELU-tanh). What differs is read from the config (model/model_config.h).
// The residual stream is kept in fp32; matmuls run in the compute dtype. The
// arithmetic itself is the LayerKernels' (kernels/layer_kernels.h): the
// engine's CPU kernels, or ATen's ops on the chosen device (CUDA). The
// transformer only computes: the caller gives it a planned step and the cache.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "batch/step_plan.h"
#include "cache/kv_cache.h"
#include "kernels/layer_kernels.h"
#include "model/checkpoint.h"
#include "model/moe.h"
#include "model/rotary.h"

namespace tq {

// Named intermediate tensors of forward passes, each copied to the host in fp32: what the GPU
// self-check compares between two forward paths layer by layer (tq_cli selfcheck).
struct ForwardTrace {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

// A step's inputs on the device, made on the host before the forward runs (runner/step_inputs.h):
// everything the forward reads, so that it runs without host work between its launches, and a
// CUDA graph captured from one step replays another of the same shape once refill has copied the
// other's inputs into the first's tensors (runner/step_graphs.h).
struct StepInputs {
  at::Tensor token_ids, positions, slots, key_slots;  // [T], [T], [T], [Tk] int64
  at::Tensor rope_positions, long_rope;                // as StepBatch's; undefined where it has none
  at::Tensor image_rows, image_embeds;                 // likewise
  std::unique_ptr<StepAttention> attend[2];            // the step's plans, without and with the sliding window
  // The rows the last layer computes: every row (output_rows undefined), or the output rows with
  // plans of their own. Every row where the plans have a fixed launch shape (a graph's step).
  at::Tensor output_rows;
  std::unique_ptr<StepAttention> attend_output[2];
  // The launch shapes of its plans and the sizes of its tensors: equal for two steps that launch
  // alike. Empty where a plan has none (the step runs without a graph).
  std::vector<int64_t> launch_shape;
  // Once placed on the device (runner/step_inputs.h): the buffer its arrays and its plans' are views of.
  at::Tensor placed;
};

struct CheckpointWeights;  // transformer_weights.cpp: where the constructor takes weights from

class Transformer {
 public:
  // Weights are prepared by `kernels` and live on its device.
  Transformer(const Checkpoint& ckpt, at::ScalarType compute_dtype, int64_t max_positions, std::unique_ptr<LayerKernels> kernels);
  const ModelConfig& config() const { return config_; }
  at::ScalarType dtype() const { return dtype_; }
  const at::Tensor& lm_head() const { return lm_head_; }
  const LayerKernels& kernels() const { return *kernels_; }
  // The layers' linear weights as the kernels keep them (packed, or quantized).
  int64_t linear_bytes() const;
  // A step's forward pass, its inputs prepared by the host (runner/step_inputs.h): it reads nothing
  // from the host. run writes the step's keys and values into the cache (on the kernels' device)
  // and returns the final (normed) hidden states of the rows inputs.output_rows names (all where
  // undefined), [R, hidden] fp32 on that device. `between` (where set) is called before each layer but the first with
  // that layer's index: where a CUDA graph's capture is cut (runner/step_graphs.h).
  using BetweenLayers = std::function<void(int64_t next_layer)>;
  at::Tensor run(const StepInputs& inputs, KvCache& cache, const BetweenLayers& between = {}) const;
  // Records the intermediate tensors of the following forward passes into `trace` (null: stop).
  void trace_into(ForwardTrace* trace) { trace_ = trace; }

 private:
  struct Layer {
    LayerKind kind;
    // fp32, (offset +) weight; each undefined where the config's NormPlacement has none.
    at::Tensor attn_in_norm, attn_out_norm, ffn_in_norm, ffn_out_norm;
    std::unique_ptr<Linear> qkv;  // q, k, v stacked; bias only with attention_bias
    std::unique_ptr<Linear> o, gate, up, down;
    std::unique_ptr<Linear> gate_up;  // with fused row kernels: gate and up stacked (gate, up null)
    std::unique_ptr<MoeBlock> moe;    // a sparse layer's mixture of experts, in place of gate, up and down
    at::Tensor q_norm, k_norm;  // undefined unless qk_norm (q_norm carries query_scale)
  };
  // The constructor's steps: a layer's weights (norms, attention, MLP) from the checkpoint, then the rotary tables.
  void load_norms(const CheckpointWeights& w, int64_t i, Layer& l) const;
  void load_attention(const CheckpointWeights& w, int64_t i, Layer& l) const;
  void load_mlp(const CheckpointWeights& w, int64_t i, Layer& l) const;
  std::unique_ptr<MoeBlock> load_moe(const CheckpointWeights& w, int64_t i) const;
  void load_rotary(int64_t max_positions);
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) const;
  // x += its sublayer's output, normed first where the layer has an output norm.
  void add_output(const Linear& proj, const at::Tensor& in, const at::Tensor& out_norm, at::Tensor& x) const;
  // add_output, then the next sublayer's input: x normed by next_norm (or x as it is, where
  // undefined), in the compute dtype; with fused row kernels the add and the norm are one launch.
  at::Tensor add_then_input(const Linear& proj, const at::Tensor& in, const at::Tensor& out_norm, at::Tensor& x, const at::Tensor& next_norm) const;
  at::Tensor input(const at::Tensor& x, const at::Tensor& norm_weight) const;
  // The gated MLP's act(gate(h)) * up(h), in the compute dtype.
  at::Tensor gated(const Layer& l, const at::Tensor& h) const;
  // The MLP sublayer: its output added into x, then the next sublayer's input (undefined next_norm: none needed).
  at::Tensor add_mlp_then_input(const Layer& l, const at::Tensor& h, at::Tensor& x, const at::Tensor& next_norm, bool last) const;
  // Whether a layer's q/k norm, RoPE and K/V write can be one fused launch (kernels/fused/):
  // per-head q/k norms or none, RoPE over the whole head or none.
  bool fuses_qk(const Layer& l) const;
  // RoPE's tables for a step and the row of each new token in them: rows by position (with
  // longrope, the long rows for the tokens of long sequences), or with M-RoPE one row per token,
  // each frequency taken from its section's position stream.
  struct RopeRows {
    at::Tensor cos, sin, index;
  };
  RopeRows rope_rows(const StepInputs& step, const RotaryTables& tables) const;
  // RoPE over the first rotary_dim dims of each head of x [T, heads, head_dim] fp32; the rest pass.
  at::Tensor rotate(const at::Tensor& x, const RopeRows& rope) const;
  // y [T, heads, head_dim] fp32 turned by RoPE where the layer has it, in the compute dtype.
  at::Tensor rope_if_rotary(const Layer& l, const at::Tensor& y, const RopeRows& rope) const;
  // A layer's queries, from its qkv projection [T, (heads + 2 kv_heads) head_dim] (fp32; the GEMM's own bf16 where the
  // fused rows read it), its keys and values written into the cache at `slots` on the way: q/k norms and RoPE, one fused
  // launch where the kernels can (then `turned`, and the keys and values into `step` too where it holds arrays), else the
  // separate ops (then `raw`, not yet turned).
  struct Queries {
    at::Tensor raw, turned;
  };
  Queries project(const Layer& l, int64_t li, const at::Tensor& qkv, const RopeRows& rope, const at::Tensor& slots, KvCache& cache,
                  StepKeys& step) const;
  // The arrays the step's plans read its own keys and values in (StepAttention::step_key_rows), made once for its
  // layers; none where no plan reads them or the layers cannot write them (no fused rows).
  StepKeys step_keys(const StepInputs& in, int64_t tokens) const;
  // The queries' rows `rows` (all where undefined), turned.
  at::Tensor query_rows(const Layer& l, const Queries& q, const RopeRows& rope, const at::Tensor& rows) const;

  ModelConfig config_;
  at::ScalarType dtype_;
  std::unique_ptr<LayerKernels> kernels_;
  at::Tensor embed_, final_norm_, lm_head_;
  RotaryTables rope_, local_rope_;  // local: Gemma 3's sliding layers' (undefined otherwise)
  at::Tensor mrope_stream_;  // M-RoPE: [head_dim] int64, the position stream (t 0, h 1, w 2) of each column
  std::vector<Layer> layers_;
  ForwardTrace* trace_ = nullptr;
  void record(int64_t layer, const char* what, const at::Tensor& t) const;
};

}  // namespace tq
