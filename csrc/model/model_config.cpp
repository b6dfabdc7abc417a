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
  else if (c.architecture_name == "Qwen2VLForConditionalGeneration") c.arch = Architecture::Qwen2VL;
  else
    throw EngineError(code::kUnknownArchitecture,
                      file + ": unknown architecture " + c.architecture_name +
                          " (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2VLForConditionalGeneration)");
  // A vision-language config keeps the text model's fields at the top level (transformers 4)
  // or in text_config (transformers 5).
  const bool vl = c.arch == Architecture::Qwen2VL;
  const json& t = vl && j.contains("text_config") && j["text_config"].is_object() ? j["text_config"] : j;

  c.vocab_size = field<int64_t>(t, "vocab_size", file);
  c.hidden_size = field<int64_t>(t, "hidden_size", file);
  c.intermediate_size = field<int64_t>(t, "intermediate_size", file);
  c.num_layers = field<int64_t>(t, "num_hidden_layers", file);
  c.num_heads = field<int64_t>(t, "num_attention_heads", file);
  c.num_kv_heads = field_or<int64_t>(t, "num_key_value_heads", c.num_heads, file);
  c.head_dim = field_or<int64_t>(t, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0, file);
  c.max_position_embeddings = field_or<int64_t>(t, "max_position_embeddings", 32768, file);
  // transformers 5 writes RoPE's settings (theta, type, scaling) into one rope_parameters object;
  // earlier versions wrote rope_theta and rope_scaling at the top level.
  const json none = json::object();
  const json& rope = t.contains("rope_parameters") && t["rope_parameters"].is_object() ? t["rope_parameters"] : none;
  c.rope_theta = field_or<double>(rope, "rope_theta", field_or<double>(t, "rope_theta", 10000.0, file), file);
  c.rms_norm_eps = field_or<double>(t, "rms_norm_eps", 1e-6, file);
  c.tie_word_embeddings = field_or<bool>(j, "tie_word_embeddings", field_or<bool>(t, "tie_word_embeddings", false, file), file);
  c.attention_bias = field_or<bool>(t, "attention_bias", c.arch == Architecture::Qwen2 || vl, file);
  c.qk_norm = c.arch == Architecture::Qwen3;
  // Qwen2/Qwen3 configs carry sliding_window but only apply it with use_sliding_window.
  bool uses_window = c.arch == Architecture::Mistral || field_or<bool>(t, "use_sliding_window", false, file);
  if (uses_window && t.contains("sliding_window") && !t["sliding_window"].is_null()) {
    c.sliding_window = field<int64_t>(t, "sliding_window", file);
  }
  const bool scaling = t.contains("rope_scaling") && !t["rope_scaling"].is_null();
  if (scaling || !rope.empty()) {
    const json& rs = scaling ? t["rope_scaling"] : rope;
    std::string type = field_or<std::string>(rs, "rope_type", field_or<std::string>(rs, "type", "", file), file);
    if (type == "llama3") {
      Llama3RopeScaling s;
      s.factor = field<double>(rs, "factor", file);
      s.low_freq_factor = field<double>(rs, "low_freq_factor", file);
      s.high_freq_factor = field<double>(rs, "high_freq_factor", file);
      s.original_max_position_embeddings = field<int64_t>(rs, "original_max_position_embeddings", file);
      c.rope_scaling = s;
    } else if (type != "default" && type != "mrope" && !type.empty()) {
      throw EngineError(code::kCheckpointInvalid, file + ": rope_scaling type " + type + " is not supported (supported: llama3, mrope)");
    }
    if (rs.contains("mrope_section")) c.mrope_section = field<std::vector<int64_t>>(rs, "mrope_section", file);
  }
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 ||
      c.vocab_size <= 0 || c.intermediate_size <= 0)
    throw EngineError(code::kCheckpointInvalid, file + ": sizes must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    throw EngineError(code::kCheckpointInvalid, file + ": num_attention_heads is not a multiple of num_key_value_heads");
  if (!c.mrope_section.empty()) {
    int64_t sum = 0;
    for (auto n : c.mrope_section) sum += n;
    if (c.mrope_section.size() != 3 || sum * 2 != c.head_dim)
      throw EngineError(code::kCheckpointInvalid, file + ": mrope_section must be three sizes summing to head_dim / 2 = " + std::to_string(c.head_dim / 2));
  }
  if (vl) {
    if (c.mrope_section.empty()) throw EngineError(code::kCheckpointInvalid, file + ": a Qwen2-VL config needs rope_scaling.mrope_section");
    if (!j.contains("vision_config") || !j["vision_config"].is_object()) throw EngineError(code::kCheckpointInvalid, file + ": missing field vision_config");
    const json& v = j["vision_config"];
    const std::string vfile = file + " vision_config";
    VisionConfig vc;
    vc.depth = field<int64_t>(v, "depth", vfile);
    vc.embed_dim = field<int64_t>(v, "embed_dim", vfile);
    vc.out_hidden = field_or<int64_t>(v, "hidden_size", c.hidden_size, vfile);
    vc.num_heads = field<int64_t>(v, "num_heads", vfile);
    vc.mlp_ratio = field_or<int64_t>(v, "mlp_ratio", 4, vfile);
    vc.patch_size = field_or<int64_t>(v, "patch_size", 14, vfile);
    vc.temporal_patch_size = field_or<int64_t>(v, "temporal_patch_size", 2, vfile);
    vc.spatial_merge_size = field_or<int64_t>(v, "spatial_merge_size", 2, vfile);
    vc.in_channels = field_or<int64_t>(v, "in_channels", field_or<int64_t>(v, "in_chans", 3, vfile), vfile);
    const auto act = field_or<std::string>(v, "hidden_act", "quick_gelu", vfile);
    if (act != "quick_gelu") throw EngineError(code::kCheckpointInvalid, vfile + ": hidden_act " + act + " is not supported (Qwen2-VL's is quick_gelu)");
    if (vc.depth <= 0 || vc.embed_dim <= 0 || vc.num_heads <= 0 || vc.embed_dim % vc.num_heads != 0 || (vc.embed_dim / vc.num_heads) % 4 != 0 ||
        vc.in_channels != 3 || vc.out_hidden != c.hidden_size)
      throw EngineError(code::kCheckpointInvalid, vfile + ": sizes must be positive, embed_dim / num_heads a multiple of 4, in_channels 3 and hidden_size the text model's");
    c.vision = vc;
    c.image_tokens.vision_start = field_or<int64_t>(j, "vision_start_token_id", c.image_tokens.vision_start, file);
    c.image_tokens.vision_end = field_or<int64_t>(j, "vision_end_token_id", c.image_tokens.vision_end, file);
    c.image_tokens.image_pad = field_or<int64_t>(j, "image_token_id", c.image_tokens.image_pad, file);
  }
  return c;
}

}  // namespace tq
