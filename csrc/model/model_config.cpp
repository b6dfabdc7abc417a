#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "common/errors.h"

namespace tq {
namespace {

using nlohmann::json;

// The other names transformers reads a field by (its configs' attribute_map), either way round: a config written by one
// version, or by hand, may use either. Qwen3-MoE and Mixtral map num_experts to num_local_experts (transformers 5 writes
// Qwen3-MoE's so), Qwen2-MoE stores num_experts.
constexpr std::pair<const char*, const char*> kFieldAliases[] = {{"num_experts", "num_local_experts"}};

// The name the config holds the field under: key, else an alias of it, else nullptr.
const char* present_name(const json& j, const char* key) {
  auto present = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  if (present(key)) return key;
  for (const auto& [a, b] : kFieldAliases) {
    if (std::string_view(key) == a && present(b)) return b;
    if (std::string_view(key) == b && present(a)) return a;
  }
  return nullptr;
}

template <typename T>
T field(const json& j, const char* key, const std::string& file) {
  const char* name = present_name(j, key);
  if (!name) throw EngineError(code::kCheckpointInvalid, file + ": missing field " + key);
  try {
    return j[name].get<T>();
  } catch (const json::exception&) {
    throw EngineError(code::kCheckpointInvalid, file + ": field " + std::string(name) + " has the wrong type");
  }
}

template <typename T>
T field_or(const json& j, const char* key, T fallback, const std::string& file) {
  if (!present_name(j, key)) return fallback;
  return field<T>(j, key, file);
}


struct Family {
  const char* name;
  Architecture arch;
};
constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", Architecture::Llama},     {"MistralForCausalLM", Architecture::Mistral},
    {"Qwen2ForCausalLM", Architecture::Qwen2},     {"Qwen3ForCausalLM", Architecture::Qwen3},
    {"Gemma3ForCausalLM", Architecture::Gemma3},   {"Phi3ForCausalLM", Architecture::Phi3},
    {"Olmo2ForCausalLM", Architecture::Olmo2},     {"SmolLM3ForCausalLM", Architecture::SmolLM3},
    {"Qwen2VLForConditionalGeneration", Architecture::Qwen2VL}, {"Qwen2_5_VLForConditionalGeneration", Architecture::Qwen25VL},
    {"Qwen3MoeForCausalLM", Architecture::Qwen3Moe}, {"MixtralForCausalLM", Architecture::Mixtral},
    {"Qwen2MoeForCausalLM", Architecture::Qwen2Moe},
};

std::string supported_list() {
  std::string out;
  for (const auto& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

// One RoPE's settings from `p` (transformers 5's rope_parameters, or one layer type's entry of it,
// or transformers 4's rope_scaling), with theta and the fields transformers 4 kept at the top of
// the config (`t`) as fallbacks.
RopeConfig parse_rope(const json& p, const json& t, double default_theta, int64_t max_positions, const std::string& file) {
  RopeConfig r;
  r.theta = field_or<double>(p, "rope_theta", default_theta, file);
  const auto type = field_or<std::string>(p, "rope_type", field_or<std::string>(p, "type", "default", file), file);
  if (type == "linear") {
    r.scaling = RopeConfig::Scaling::Linear;
    r.factor = field<double>(p, "factor", file);
  } else if (type == "llama3") {
    r.scaling = RopeConfig::Scaling::Llama3;
    r.factor = field<double>(p, "factor", file);
    r.low_freq_factor = field<double>(p, "low_freq_factor", file);
    r.high_freq_factor = field<double>(p, "high_freq_factor", file);
    r.original_max_position_embeddings = field<int64_t>(p, "original_max_position_embeddings", file);
  } else if (type == "longrope") {
    r.scaling = RopeConfig::Scaling::LongRope;
    r.short_factor = field<std::vector<double>>(p, "short_factor", file);
    r.long_factor = field<std::vector<double>>(p, "long_factor", file);
    r.original_max_position_embeddings =
        field_or<int64_t>(p, "original_max_position_embeddings", field<int64_t>(t, "original_max_position_embeddings", file), file);
    // transformers: Phi-3 gives no factor; the ratio of the two lengths stands in, and sets the attention factor.
    const double factor = field_or<double>(p, "factor", static_cast<double>(max_positions) / r.original_max_position_embeddings, file);
    r.attention_factor = field_or<double>(
        p, "attention_factor", factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(r.original_max_position_embeddings))),
        file);
  } else if (type != "default" && type != "mrope") {
    throw EngineError(code::kCheckpointInvalid, file + ": rope type " + type + " is not supported (supported: default, linear, llama3, longrope, mrope)");
  }
  return r;
}

Activation parse_activation(const json& t, const std::string& file) {
  const auto act = field_or<std::string>(t, "hidden_activation", field_or<std::string>(t, "hidden_act", "silu", file), file);
  if (act == "silu") return Activation::Silu;
  if (act == "gelu_pytorch_tanh") return Activation::GeluTanh;
  throw EngineError(code::kCheckpointInvalid, file + ": hidden_act " + act + " is not supported (supported: silu, gelu_pytorch_tanh)");
}

// Which layers slide, turn RoPE, and with which tables; and the window, when some layer slides.
void parse_layers(const json& t, ModelConfig& c, const std::string& file) {
  const auto a = c.arch;
  c.layers.assign(c.num_layers, LayerKind{});
  const bool has_window = t.contains("sliding_window") && !t["sliding_window"].is_null();
  if (t.contains("layer_types") && t["layer_types"].is_array()) {
    const auto types = field<std::vector<std::string>>(t, "layer_types", file);
    if (static_cast<int64_t>(types.size()) != c.num_layers) throw EngineError(code::kCheckpointInvalid, file + ": layer_types has not num_hidden_layers entries");
    for (int64_t i = 0; i < c.num_layers; ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        throw EngineError(code::kCheckpointInvalid, file + ": layer type " + types[i] + " is not supported (sliding_attention, full_attention)");
      c.layers[i].sliding = types[i] == "sliding_attention";
    }
  } else if (a == Architecture::Gemma3) {
    // transformers 4's Gemma 3: every sliding_window_pattern-th layer is global.
    const auto pattern = field_or<int64_t>(t, "sliding_window_pattern", 6, file);
    for (int64_t i = 0; i < c.num_layers; ++i) c.layers[i].sliding = pattern <= 0 || (i + 1) % pattern != 0;
  } else if (a == Architecture::Mistral || a == Architecture::Phi3 || a == Architecture::Mixtral) {
    for (auto& l : c.layers) l.sliding = has_window;
  } else if (field_or<bool>(t, "use_sliding_window", false, file)) {
    // Qwen2/Qwen3/SmolLM3 carry sliding_window but apply it only with use_sliding_window, from max_window_layers on.
    const auto from = a == Architecture::SmolLM3 ? 0 : field_or<int64_t>(t, "max_window_layers", 0, file);
    for (int64_t i = from; i < c.num_layers; ++i) c.layers[i].sliding = has_window;
  }
  for (const auto& l : c.layers)
    if (l.sliding) {
      if (!has_window) throw EngineError(code::kCheckpointInvalid, file + ": sliding layers need sliding_window");
      c.sliding_window = field<int64_t>(t, "sliding_window", file);
    }
  if (a == Architecture::Gemma3)
    for (auto& l : c.layers) l.local_rope = l.sliding;
  if (a == Architecture::SmolLM3) {
    std::vector<int64_t> uses;
    if (t.contains("no_rope_layers") && !t["no_rope_layers"].is_null()) {
      uses = field<std::vector<int64_t>>(t, "no_rope_layers", file);
    } else {
      const auto interval = field_or<int64_t>(t, "no_rope_layer_interval", 4, file);
      for (int64_t i = 0; i < c.num_layers; ++i) uses.push_back(interval <= 0 || (i + 1) % interval != 0);
    }
    if (static_cast<int64_t>(uses.size()) != c.num_layers) throw EngineError(code::kCheckpointInvalid, file + ": no_rope_layers has not num_hidden_layers entries");
    for (int64_t i = 0; i < c.num_layers; ++i) c.layers[i].rotary = uses[i] != 0;  // SmolLM3's 1 means "uses RoPE"
  }
}

// RoPE's settings: transformers 5's rope_parameters (flat, or per layer type for Gemma 3), else
// transformers 4's rope_theta / rope_scaling (and Gemma 3's rope_local_base_freq).
void parse_ropes(const json& t, ModelConfig& c, const std::string& file) {
  const json none = json::object();
  const json& params = t.contains("rope_parameters") && t["rope_parameters"].is_object() ? t["rope_parameters"] : none;
  const json& scaling = t.contains("rope_scaling") && t["rope_scaling"].is_object() ? t["rope_scaling"] : none;
  const double theta = field_or<double>(t, "rope_theta", 10000.0, file);
  const bool per_type = params.contains("full_attention") || params.contains("sliding_attention");
  const json& global = per_type ? (params.contains("full_attention") ? params["full_attention"] : none) : (params.empty() ? scaling : params);
  c.rope = parse_rope(global, t, theta, c.max_position_embeddings, file);
  if (c.arch == Architecture::Gemma3) {
    const json& local = per_type && params.contains("sliding_attention") ? params["sliding_attention"] : none;
    c.local_rope = parse_rope(local, t, field_or<double>(t, "rope_local_base_freq", 10000.0, file), c.max_position_embeddings, file);
  }
  if (global.contains("mrope_section")) c.mrope_section = field<std::vector<int64_t>>(global, "mrope_section", file);
  const double partial = field_or<double>(global, "partial_rotary_factor", field_or<double>(t, "partial_rotary_factor", 1.0, file), file);
  c.rotary_dim = static_cast<int64_t>(c.head_dim * partial);
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim)
    throw EngineError(code::kCheckpointInvalid, file + ": partial_rotary_factor must turn an even number of head dimensions");
  for (const auto* r : {&c.rope, c.local_rope ? &*c.local_rope : nullptr})
    if (r && r->scaling == RopeConfig::Scaling::LongRope &&
        (static_cast<int64_t>(r->short_factor.size()) * 2 != c.rotary_dim || static_cast<int64_t>(r->long_factor.size()) * 2 != c.rotary_dim))
      throw EngineError(code::kCheckpointInvalid, file + ": longrope's short_factor and long_factor need rotary_dim / 2 = " + std::to_string(c.rotary_dim / 2) + " entries");
}

}  // namespace

namespace {

json read_config_json(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw EngineError(code::kCheckpointInvalid, file + ": cannot open (is --base a checkpoint folder?)");
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    throw EngineError(code::kCheckpointInvalid, file + ": not valid JSON: " + e.what());
  }
}

const Family& family_of(const json& j, const std::string& file) {
  auto archs = field<std::vector<std::string>>(j, "architectures", file);
  if (archs.empty()) throw EngineError(code::kUnknownArchitecture, file + ": architectures is empty");
  for (const auto& f : kFamilies)
    if (archs[0] == f.name) return f;
  throw EngineError(code::kUnknownArchitecture, file + ": unknown architecture " + archs[0] + " (supported: " + supported_list() + ")");
}

// The text model's sizes (in `t`: the top level, or a vision-language config's text_config) and
// what its family does differently (norms, q/k norms, fused projections, Gemma 3's scalings).
void read_text_model(const json& j, const json& t, ModelConfig& c, const std::string& file) {
  const auto a = c.arch;
  const bool vl = a == Architecture::Qwen2VL || a == Architecture::Qwen25VL;
  c.vocab_size = field<int64_t>(t, "vocab_size", file);
  c.hidden_size = field<int64_t>(t, "hidden_size", file);
  c.intermediate_size = field<int64_t>(t, "intermediate_size", file);
  c.num_layers = field<int64_t>(t, "num_hidden_layers", file);
  c.num_heads = field<int64_t>(t, "num_attention_heads", file);
  c.num_kv_heads = field_or<int64_t>(t, "num_key_value_heads", c.num_heads, file);
  c.head_dim = field_or<int64_t>(t, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0, file);
  c.max_position_embeddings = field_or<int64_t>(t, "max_position_embeddings", 32768, file);
  c.rms_norm_eps = field_or<double>(t, "rms_norm_eps", 1e-6, file);
  // transformers' defaults where a config leaves it out: Gemma 3 and SmolLM3 tie their embeddings.
  const bool ties = a == Architecture::Gemma3 || a == Architecture::SmolLM3;
  c.tie_word_embeddings = field_or<bool>(j, "tie_word_embeddings", field_or<bool>(t, "tie_word_embeddings", ties, file), file);
  // Qwen2-MoE names its q/k/v bias qkv_bias (transformers' default true), the others attention_bias.
  const bool qwen2_bias = a == Architecture::Qwen2 || a == Architecture::Qwen2Moe || vl;
  c.attention_bias = field_or<bool>(t, "attention_bias", field_or<bool>(t, "qkv_bias", qwen2_bias, file), file);
  const bool per_head = a == Architecture::Qwen3 || a == Architecture::Qwen3Moe || a == Architecture::Gemma3;
  c.qk_norm = per_head ? QkNorm::PerHead : a == Architecture::Olmo2 ? QkNorm::Whole : QkNorm::None;
  c.norms = a == Architecture::Gemma3 ? NormPlacement::Sandwich : a == Architecture::Olmo2 ? NormPlacement::Post : NormPlacement::Pre;
  c.activation = parse_activation(t, file);
  c.fused_projections = a == Architecture::Phi3;
  if (a == Architecture::Gemma3) {
    c.norm_weight_offset = 1.0;
    c.scale_embeddings = true;
    c.query_scale = std::sqrt(static_cast<double>(c.head_dim) / field_or<double>(t, "query_pre_attn_scalar", static_cast<double>(c.head_dim), file));
    // attn_logit_softcapping is read by nobody: transformers' Gemma3Attention stores it and never applies it (4.50
    // to 5.x), and released checkpoints set it null. The engine computes Gemma 3 as the reference does.
    c.final_logit_softcap = field_or<double>(t, "final_logit_softcapping", 0.0, file);
  }
}

void check_text_model(const ModelConfig& c, const std::string& file) {
  if (c.num_heads % c.num_kv_heads != 0)
    throw EngineError(code::kCheckpointInvalid, file + ": num_attention_heads is not a multiple of num_key_value_heads");
  if (!c.mrope_section.empty()) {
    int64_t sum = 0;
    for (auto n : c.mrope_section) sum += n;
    if (c.mrope_section.size() != 3 || sum * 2 != c.head_dim)
      throw EngineError(code::kCheckpointInvalid, file + ": mrope_section must be three sizes summing to head_dim / 2 = " + std::to_string(c.head_dim / 2));
  }
}

// The experts of the mixture-of-experts families, and which layers are sparse: transformers' rule, a layer not in
// mlp_only_layers whose (index + 1) is a multiple of decoder_sparse_step (Mixtral: every layer).
void read_moe(const json& t, ModelConfig& c, const std::string& file) {
  const auto a = c.arch;
  MoeConfig m;
  const bool mixtral = a == Architecture::Mixtral;
  m.num_experts = field<int64_t>(t, "num_experts", file);  // Mixtral's num_local_experts too (kFieldAliases)
  m.top_k = field<int64_t>(t, "num_experts_per_tok", file);
  m.expert_intermediate = mixtral ? c.intermediate_size : field<int64_t>(t, "moe_intermediate_size", file);
  m.renormalize = mixtral || field_or<bool>(t, "norm_topk_prob", false, file);
  if (a == Architecture::Qwen2Moe) m.shared_intermediate = field<int64_t>(t, "shared_expert_intermediate_size", file);
  if (m.num_experts <= 0 || m.top_k <= 0 || m.top_k > m.num_experts || m.expert_intermediate <= 0 || m.shared_intermediate < 0)
    throw EngineError(code::kCheckpointInvalid, file + ": the experts need num_experts > 0, 0 < num_experts_per_tok <= num_experts and a positive width");
  const auto step = mixtral ? 1 : field_or<int64_t>(t, "decoder_sparse_step", 1, file);
  const auto dense = mixtral ? std::vector<int64_t>{} : field_or<std::vector<int64_t>>(t, "mlp_only_layers", {}, file);
  if (step <= 0) throw EngineError(code::kCheckpointInvalid, file + ": decoder_sparse_step must be positive");
  for (int64_t i = 0; i < c.num_layers; ++i)
    c.layers[i].sparse = std::find(dense.begin(), dense.end(), i) == dense.end() && (i + 1) % step == 0;
  c.moe = m;
}

// Qwen2-VL's and Qwen2.5-VL's vision_config, checked against the text model it feeds.
VisionConfig read_vision_config(const json& j, const ModelConfig& c, const std::string& file) {
  if (!j.contains("vision_config") || !j["vision_config"].is_object()) throw EngineError(code::kCheckpointInvalid, file + ": missing field vision_config");
  const json& v = j["vision_config"];
  const std::string vfile = file + " vision_config";
  VisionConfig vc;
  vc.qwen25 = c.arch == Architecture::Qwen25VL;
  vc.depth = field<int64_t>(v, "depth", vfile);
  vc.num_heads = field<int64_t>(v, "num_heads", vfile);
  vc.patch_size = field_or<int64_t>(v, "patch_size", 14, vfile);
  vc.temporal_patch_size = field_or<int64_t>(v, "temporal_patch_size", 2, vfile);
  vc.spatial_merge_size = field_or<int64_t>(v, "spatial_merge_size", 2, vfile);
  vc.in_channels = field_or<int64_t>(v, "in_channels", field_or<int64_t>(v, "in_chans", 3, vfile), vfile);
  // The two towers name their widths differently: Qwen2-VL's embed_dim is the ViT's and hidden_size the
  // text model's; Qwen2.5-VL's hidden_size is the ViT's and out_hidden_size the text model's.
  if (vc.qwen25) {
    vc.embed_dim = field<int64_t>(v, "hidden_size", vfile);
    vc.out_hidden = field_or<int64_t>(v, "out_hidden_size", c.hidden_size, vfile);
    vc.intermediate_size = field<int64_t>(v, "intermediate_size", vfile);
    vc.window_size = field_or<int64_t>(v, "window_size", 112, vfile);
    vc.full_attention_blocks = field_or<std::vector<int64_t>>(v, "fullatt_block_indexes", {}, vfile);
  } else {
    vc.embed_dim = field<int64_t>(v, "embed_dim", vfile);
    vc.out_hidden = field_or<int64_t>(v, "hidden_size", c.hidden_size, vfile);
    vc.mlp_ratio = field_or<int64_t>(v, "mlp_ratio", 4, vfile);
    vc.intermediate_size = vc.embed_dim * vc.mlp_ratio;
  }
  const auto act = field_or<std::string>(v, "hidden_act", vc.qwen25 ? "silu" : "quick_gelu", vfile);
  const char* expected = vc.qwen25 ? "silu" : "quick_gelu";
  if (act != expected)
    throw EngineError(code::kCheckpointInvalid, vfile + ": hidden_act " + act + " is not supported (" + c.architecture_name + "'s is " + expected + ")");
  if (vc.depth <= 0 || vc.embed_dim <= 0 || vc.num_heads <= 0 || vc.embed_dim % vc.num_heads != 0 || (vc.embed_dim / vc.num_heads) % 4 != 0 ||
      vc.in_channels != 3 || vc.out_hidden != c.hidden_size || vc.intermediate_size <= 0)
    throw EngineError(code::kCheckpointInvalid, vfile + ": sizes must be positive, embed_dim / num_heads a multiple of 4, in_channels 3 and hidden_size the text model's");
  if (vc.qwen25 && (vc.window_size < vc.patch_size * vc.spatial_merge_size || vc.window_size % (vc.patch_size * vc.spatial_merge_size) != 0))
    throw EngineError(code::kCheckpointInvalid, vfile + ": window_size must be a positive multiple of patch_size * spatial_merge_size");
  for (auto b : vc.full_attention_blocks)
    if (b < 0 || b >= vc.depth) throw EngineError(code::kCheckpointInvalid, vfile + ": fullatt_block_indexes must name blocks below depth");
  return vc;
}

}  // namespace

ModelConfig read_model_config(const std::string& dir) {
  const std::string file = dir + "/config.json";
  const json j = read_config_json(file);
  ModelConfig c;
  const Family& family = family_of(j, file);
  c.architecture_name = family.name;
  c.arch = family.arch;
  // A vision-language config keeps the text model's fields at the top level (transformers 4)
  // or in text_config (transformers 5).
  const bool vl = c.arch == Architecture::Qwen2VL || c.arch == Architecture::Qwen25VL;
  const json& t = vl && j.contains("text_config") && j["text_config"].is_object() ? j["text_config"] : j;
  read_text_model(j, t, c, file);
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 || c.vocab_size <= 0 ||
      c.intermediate_size <= 0)
    throw EngineError(code::kCheckpointInvalid, file + ": sizes must be positive");
  parse_ropes(t, c, file);
  parse_layers(t, c, file);
  if (c.arch == Architecture::Qwen3Moe || c.arch == Architecture::Mixtral || c.arch == Architecture::Qwen2Moe) read_moe(t, c, file);
  check_text_model(c, file);
  if (vl) {
    if (c.mrope_section.empty()) throw EngineError(code::kCheckpointInvalid, file + ": a " + c.architecture_name + " config needs rope_scaling.mrope_section");
    c.vision = read_vision_config(j, c, file);
    c.image_tokens.vision_start = field_or<int64_t>(j, "vision_start_token_id", c.image_tokens.vision_start, file);
    c.image_tokens.vision_end = field_or<int64_t>(j, "vision_end_token_id", c.image_tokens.vision_end, file);
    c.image_tokens.image_pad = field_or<int64_t>(j, "image_token_id", c.image_tokens.image_pad, file);
  }
  return c;
}

}  // namespace tq
