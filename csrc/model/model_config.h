// The architecture facts the forward pass needs, read from an HF config.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace tq {

enum class Architecture { Llama, Mistral, Qwen2, Qwen3 };

struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
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
};

// Parses `<dir>/config.json`; errors name the file and the field.
ModelConfig read_model_config(const std::string& dir);

}  // namespace tq
