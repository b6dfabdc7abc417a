#include "model/model_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/errors.h"

namespace tq {
namespace {

using nlohmann::json;

template <typename T>
T field(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) throw EngineError(code::kCheckpointInvalid, file + ": missing field " + key);
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    throw EngineError(code::kCheckpointInvalid, file + ": field " + std::string(key) + " has the wrong type");
  }
}

template <typename T>
T field_or(const json& j, const char* key, T fallback, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return field<T>(j, key, file);
}

}  // namespace

ModelConfig read_model_config(const std::string& dir) {
  const std::string file = dir + "/config.json";
  std::ifstream in(file);
  if (!in) throw EngineError(code::kCheckpointInvalid, file + ": cannot open (is --base a checkpoint folder?)");
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    throw EngineError(code::kCheckpointInvalid, file + ": not valid JSON: " + e.what());
  }
  ModelConfig c;
  auto archs = field<std::vector<std::string>>(j, "architectures", file);
  if (archs.empty()) throw EngineError(code::kUnknownArchitecture, file + ": architectures is empty");
  c.architecture_name = archs[0];
  if (c.architecture_name == "LlamaForCausalLM") c.arch = Architecture::Llama;
  else if (c.architecture_name == "MistralForCausalLM") c.arch = Architecture::Mistral;
  else if (c.architecture_name == "Qwen2ForCausalLM") c.arch = Architecture::Qwen2;
  else if (c.architecture_name == "Qwen3ForCausalLM") c.arch = Architecture::Qwen3;
  else
    throw EngineError(code::kUnknownArchitecture,
                      file + ": unknown architecture " + c.architecture_name +
                          " (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");

  c.vocab_size = field<int64_t>(j, "vocab_size", file);
  c.hidden_size = field<int64_t>(j, "hidden_size", file);
  c.intermediate_size = field<int64_t>(j, "intermediate_size", file);
  c.num_layers = field<int64_t>(j, "num_hidden_layers", file);
  c.num_heads = field<int64_t>(j, "num_attention_heads", file);
  c.num_kv_heads = field_or<int64_t>(j, "num_key_value_heads", c.num_heads, file);
  c.head_dim = field_or<int64_t>(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0, file);
  c.max_position_embeddings = field_or<int64_t>(j, "max_position_embeddings", 32768, file);
  // transformers 5 writes RoPE's settings (theta, type, scaling) into one rope_parameters object;
  // earlier versions wrote rope_theta and rope_scaling at the top level.
  const json none = json::object();
  const json& rope = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"] : none;
  c.rope_theta = field_or<double>(rope, "rope_theta", field_or<double>(j, "rope_theta", 10000.0, file), file);
  c.rms_norm_eps = field_or<double>(j, "rms_norm_eps", 1e-6, file);
  c.tie_word_embeddings = field_or<bool>(j, "tie_word_embeddings", false, file);
  c.attention_bias = field_or<bool>(j, "attention_bias", c.arch == Architecture::Qwen2, file);
  c.qk_norm = c.arch == Architecture::Qwen3;
  // Qwen2/Qwen3 configs carry sliding_window but only apply it with use_sliding_window.
  bool uses_window = c.arch == Architecture::Mistral || field_or<bool>(j, "use_sliding_window", false, file);
  if (uses_window && j.contains("sliding_window") && !j["sliding_window"].is_null()) {
    c.sliding_window = field<int64_t>(j, "sliding_window", file);
  }
  const bool scaling = j.contains("rope_scaling") && !j["rope_scaling"].is_null();
  if (scaling || !rope.empty()) {
    const json& rs = scaling ? j["rope_scaling"] : rope;
    std::string type = field_or<std::string>(rs, "rope_type", field_or<std::string>(rs, "type", "", file), file);
    if (type == "llama3") {
      Llama3RopeScaling s;
      s.factor = field<double>(rs, "factor", file);
      s.low_freq_factor = field<double>(rs, "low_freq_factor", file);
      s.high_freq_factor = field<double>(rs, "high_freq_factor", file);
      s.original_max_position_embeddings = field<int64_t>(rs, "original_max_position_embeddings", file);
      c.rope_scaling = s;
    } else if (type != "default" && !type.empty()) {
      throw EngineError(code::kCheckpointInvalid, file + ": rope_scaling type " + type + " is not supported (supported: llama3)");
    }
  }
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 ||
      c.vocab_size <= 0 || c.intermediate_size <= 0)
    throw EngineError(code::kCheckpointInvalid, file + ": sizes must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    throw EngineError(code::kCheckpointInvalid, file + ": num_attention_heads is not a multiple of num_key_value_heads");
  return c;
}

}  // namespace tq
