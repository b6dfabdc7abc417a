// The architecture facts the forward pass needs, read from an HF config.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tq {

enum class Architecture { Llama, Mistral, Qwen2, Qwen3, Qwen2VL, Qwen25VL, Gemma3, Phi3, Olmo2, SmolLM3, Qwen3Moe, Mixtral, Qwen2Moe };

// RoPE's inverse frequencies over the rotary dimensions, as transformers' rope_type computes them
// (model/rotary.h): default, "linear" (divided by factor), "llama3" (wavelength-dependent), and
// "longrope" (per-frequency short or long factors, chosen by the sequence's length; cos and sin
// scaled by attention_factor).
struct RopeConfig {
  enum class Scaling { None, Linear, Llama3, LongRope };
  double theta = 10000.0;
  Scaling scaling = Scaling::None;
  double factor = 1.0;                                  // linear, llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 0;         // llama3; longrope: longer sequences take long_factor
  std::vector<double> short_factor, long_factor;        // longrope: rotary_dim / 2 each
  double attention_factor = 1.0;                        // longrope
};

// Where a layer's RMSNorms sit: before each sublayer (Llama), after it on its output before the
// residual add (OLMo 2), or both (Gemma 3: four norms a layer).
enum class NormPlacement { Pre, Post, Sandwich };
// q/k RMSNorm before RoPE: none, per head (Qwen3, Gemma 3), or over the whole projection (OLMo 2).
enum class QkNorm { None, PerHead, Whole };
// The gated MLP's activation: silu(gate) * up, or gelu_pytorch_tanh(gate) * up (Gemma 3).
enum class Activation { Silu, GeluTanh };

// What differs between a model's layers: Gemma 3 interleaves sliding-window layers (with their own
// RoPE base) and global ones; SmolLM3 leaves RoPE out of every fourth layer.
struct LayerKind {
  bool sliding = false;     // attends within sliding_window
  bool rotary = true;       // applies RoPE
  bool local_rope = false;  // with ModelConfig::local_rope's tables
  bool sparse = false;      // its MLP is the mixture of experts (ModelConfig::moe), else the dense one
};

// A mixture-of-experts MLP (Qwen3-MoE, Mixtral, Qwen2-MoE; model/moe.h), as transformers defines it: a router
// (a linear layer) scores the experts, a softmax over all of them, the top_k kept (ties to the lower index),
// renormalised to sum 1 where the family does, and the token's output is the weighted sum of those experts'
// gated MLPs. Qwen2-MoE adds a shared expert for every token, scaled by sigmoid(shared_expert_gate(x)).
struct MoeConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_intermediate = 0;  // each expert's width
  bool renormalize = false;         // Mixtral always; Qwen3-MoE and Qwen2-MoE when norm_topk_prob
  int64_t shared_intermediate = 0;  // Qwen2-MoE's shared expert's width (0: none)
};

// Qwen2-VL's and Qwen2.5-VL's vision tower (vision/vision_tower.h): a ViT over 14x14x2 patches
// whose PatchMerger maps each 2x2 group of patches to one text-model embedding. Qwen2.5-VL's
// blocks use RMSNorm and a SwiGLU MLP, and attend within windows but for the full-attention ones.
struct VisionConfig {
  bool qwen25 = false;       // Qwen2.5-VL's tower (else Qwen2-VL's: LayerNorm, QuickGELU, full attention)
  int64_t depth = 0;
  int64_t embed_dim = 0;     // the ViT's width
  int64_t out_hidden = 0;    // the merger's output: the text model's hidden size
  int64_t num_heads = 0;
  int64_t mlp_ratio = 4;
  int64_t intermediate_size = 0;  // the MLP's width: Qwen2.5-VL's intermediate_size, Qwen2-VL's embed_dim * mlp_ratio
  int64_t window_size = 0;        // Qwen2.5-VL: windows of window_size x window_size pixels
  std::vector<int64_t> full_attention_blocks;  // Qwen2.5-VL's fullatt_block_indexes
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t in_channels = 3;
  double rope_theta = 10000.0;
};

// The token ids that frame an image in a Qwen2-VL prompt.
struct ImageTokens {
  int64_t vision_start = 151652, vision_end = 151653, image_pad = 151655;
};

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  std::string architecture_name;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  QkNorm qk_norm = QkNorm::None;
  NormPlacement norms = NormPlacement::Pre;
  double norm_weight_offset = 0;   // Gemma: the norms scale by (offset + weight)
  Activation activation = Activation::Silu;
  bool scale_embeddings = false;   // Gemma: embeddings times sqrt(hidden_size), rounded to the compute dtype
  double query_scale = 1.0;        // attention's scale over 1/sqrt(head_dim) (Gemma 3: query_pre_attn_scalar)
  double final_logit_softcap = 0;  // the same on the output logits
  bool fused_projections = false;  // Phi-3: self_attn.qkv_proj and mlp.gate_up_proj
  std::optional<int64_t> sliding_window;
  int64_t rotary_dim = 0;          // the first rotary_dim dims of a head are turned; the rest pass (partial_rotary_factor)
  RopeConfig rope;                 // every rotary layer's, or Gemma 3's global layers'
  std::optional<RopeConfig> local_rope;  // Gemma 3's sliding-window layers (rope_local_base_freq)
  std::vector<LayerKind> layers;   // num_layers entries
  std::optional<MoeConfig> moe;    // set for mixture-of-experts families (their sparse layers: LayerKind::sparse)
  // M-RoPE (Qwen2-VL): the rotary frequencies [0, head_dim/2) split into sections driven by
  // the temporal, height and width position streams. Empty for 1-D RoPE.
  std::vector<int64_t> mrope_section;
  std::optional<VisionConfig> vision;  // set for vision-language checkpoints
  ImageTokens image_tokens;
};

// Parses `<dir>/config.json`; errors name the file and the field.
ModelConfig read_model_config(const std::string& dir);

}  // namespace tq
