// The architecture facts the forward pass needs, read from an HF config.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tq {

enum class Architecture { Llama, Mistral, Qwen2, Qwen3, Qwen2VL };

struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// Qwen2-VL's vision tower (vision/vision_tower.h): a ViT over 14x14x2 patches whose
// PatchMerger maps each 2x2 group of patches to one text-model embedding.
struct VisionConfig {
  int64_t depth = 0;
  int64_t embed_dim = 0;     // the ViT's width
  int64_t out_hidden = 0;    // the merger's output: the text model's hidden size
  int64_t num_heads = 0;
  int64_t mlp_ratio = 4;
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
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  std::optional<int64_t> sliding_window;
  std::optional<Llama3RopeScaling> rope_scaling;
  // M-RoPE (Qwen2-VL): the rotary frequencies [0, head_dim/2) split into sections driven by
  // the temporal, height and width position streams. Empty for 1-D RoPE.
  std::vector<int64_t> mrope_section;
  std::optional<VisionConfig> vision;  // set for vision-language checkpoints
  ImageTokens image_tokens;
};

// Parses `<dir>/config.json`; errors name the file and the field.
ModelConfig read_model_config(const std::string& dir);

}  // namespace tq
