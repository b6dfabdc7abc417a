#include "addon/js_values.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <utility>

#include "common/errors.h"
#include "engine/engine_info_json.h"
#include "engine/named_fields.h"

namespace tq::js {
namespace {

// A JS object of named integers.
Napi::Object numbers(Napi::Env env, std::initializer_list<std::pair<const char*, int64_t>> fields) {
  auto out = Napi::Object::New(env);
  for (const auto& [k, v] : fields) out.Set(k, static_cast<double>(v));
  return out;
}

}  // namespace

Napi::Error to_js_error(Napi::Env env, const Failure& f) {
  auto err = Napi::Error::New(env, f.message);
  err.Set("code", Napi::String::New(env, f.code));
  auto details = Napi::Object::New(env);
  for (const auto& [k, v] : f.details) details.Set(k, Napi::Number::New(env, static_cast<double>(v)));
  err.Set("details", details);
  return err;
}

[[noreturn]] void throw_bad_argument(Napi::Env env, const std::string& message) {
  throw to_js_error(env, Failure{code::kBadRequest, message, {}});
}

std::vector<int64_t> int_list(Napi::Env env, const Napi::Value& v, const std::string& name) {
  std::vector<int64_t> out;
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    if (ta.TypedArrayType() == napi_int32_array) {
      auto a = v.As<Napi::Int32Array>();
      out.assign(a.Data(), a.Data() + a.ElementLength());
      return out;
    }
    if (ta.TypedArrayType() == napi_uint32_array) {
      auto a = v.As<Napi::Uint32Array>();
      out.assign(a.Data(), a.Data() + a.ElementLength());
      return out;
    }
  } else if (v.IsArray()) {
    auto a = v.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value e = a.Get(i);
      if (!e.IsNumber()) throw_bad_argument(env, name + "[" + std::to_string(i) + "] is not a number");
      double d = e.As<Napi::Number>().DoubleValue();
      if (d != static_cast<double>(static_cast<int64_t>(d))) throw_bad_argument(env, name + "[" + std::to_string(i) + "] is not an integer");
      out.push_back(static_cast<int64_t>(d));
    }
    return out;
  }
  throw_bad_argument(env, name + " must be an Int32Array, Uint32Array or array of integers");
}

// Images of a request: [{rgb: Uint8Array (height x width x 3), width, height, key: 64 hex digits}].
std::vector<ImageInput> image_list(Napi::Env env, const Napi::Value& v, const std::string& name) {
  std::vector<ImageInput> out;
  if (v.IsUndefined() || v.IsNull()) return out;
  if (!v.IsArray()) throw_bad_argument(env, name + " must be an array of images");
  auto a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); ++i) {
    const std::string item = name + "[" + std::to_string(i) + "]";
    Napi::Value e = a.Get(i);
    if (!e.IsObject()) throw_bad_argument(env, item + " must be an object");
    auto o = e.As<Napi::Object>();
    if (!o.Get("rgb").IsTypedArray() || o.Get("rgb").As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
      throw_bad_argument(env, item + ".rgb must be a Uint8Array");
    auto rgb = o.Get("rgb").As<Napi::Uint8Array>();
    const int64_t w = o.Get("width").IsNumber() ? o.Get("width").As<Napi::Number>().Int64Value() : -1;
    const int64_t h = o.Get("height").IsNumber() ? o.Get("height").As<Napi::Number>().Int64Value() : -1;
    if (w <= 0 || h <= 0 || static_cast<int64_t>(rgb.ElementLength()) != w * h * 3)
      throw_bad_argument(env, item + ": width and height must be positive and rgb hold width x height x 3 bytes");
    if (!o.Get("key").IsString()) throw_bad_argument(env, item + ".key must be a string");
    const auto key = o.Get("key").As<Napi::String>().Utf8Value();
    if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw_bad_argument(env, item + ".key must be 64 lower-case hex digits");
    ImageInput image;
    for (int k = 0; k < 4; ++k) image.key[k] = std::stoull(key.substr(16 * k, 16), nullptr, 16);
    image.rgb = at::from_blob(rgb.Data(), {h, w, 3}, at::kByte).clone();
    out.push_back(std::move(image));
  }
  return out;
}

Napi::Float32Array float_array(Napi::Env env, const float* data, size_t n) {
  auto a = Napi::Float32Array::New(env, n);
  std::copy(data, data + n, a.Data());
  return a;
}

namespace {

// Reads an object's optional fields by type (load()'s options, a request's questions): an absent (undefined or
// null) field keeps its default, one of another type is refused with its name (`where` + key), never ignored.
class OptionReader {
 public:
  OptionReader(Napi::Env env, Napi::Object o, std::string where = "options.") : env_(env), o_(std::move(o)), where_(std::move(where)) {}
  void read(const char* key, std::string& into) const {
    if (const auto v = get(key, "a string", &Napi::Value::IsString)) into = v->As<Napi::String>().Utf8Value();
  }
  void read(const char* key, bool& into) const {
    if (const auto v = get(key, "true or false", &Napi::Value::IsBoolean)) into = v->As<Napi::Boolean>().Value();
  }
  void read(const char* key, std::optional<bool>& into) const {
    if (const auto v = get(key, "true or false", &Napi::Value::IsBoolean)) into = v->As<Napi::Boolean>().Value();
  }
  void read(const char* key, int64_t& into) const {
    if (const auto v = get(key, "a number", &Napi::Value::IsNumber)) into = v->As<Napi::Number>().Int64Value();
  }
  void read(const char* key, int& into) const {
    if (const auto v = get(key, "a number", &Napi::Value::IsNumber)) into = v->As<Napi::Number>().Int32Value();
  }
  void read(const char* key, double& into) const {
    if (const auto v = get(key, "a number", &Napi::Value::IsNumber)) into = v->As<Napi::Number>().DoubleValue();
  }
  void read(const char* key, float& into) const {
    if (const auto v = get(key, "a number", &Napi::Value::IsNumber)) into = v->As<Napi::Number>().FloatValue();
  }
  // A choice (common/choices.h) by its name; one of none of its values refused with the choices listed.
  template <class E, class = decltype(ChoiceTable<E>::values)>
  void read(const char* key, E& into) const {
    if (const auto v = get(key, "a string", &Napi::Value::IsString)) into = choice<E>(*v);
  }
  template <class E, class = decltype(ChoiceTable<E>::values)>
  void read(const char* key, std::optional<E>& into) const {
    if (const auto v = get(key, "a string", &Napi::Value::IsString)) into = choice<E>(*v);
  }

 private:
  std::optional<Napi::Value> get(const char* key, const char* kind, bool (Napi::Value::*is)() const) const {
    Napi::Value v = o_.Get(key);
    if (v.IsUndefined() || v.IsNull()) return std::nullopt;
    if (!(v.*is)()) throw_bad_argument(env_, where_ + key + " must be " + kind);
    return v;
  }
  template <class E>
  E choice(const Napi::Value& v) const {
    try {
      return parse_choice<E>(v.As<Napi::String>().Utf8Value());
    } catch (const std::invalid_argument& e) {
      throw_bad_argument(env_, e.what());
    }
  }
  Napi::Env env_;
  Napi::Object o_;
  std::string where_;
};

}  // namespace

EngineOptions load_options(Napi::Env env, const Napi::Value& v) {
  if (!v.IsObject()) throw_bad_argument(env, "load(options) needs an options object");
  if (!v.As<Napi::Object>().Get("path").IsString()) throw_bad_argument(env, "options.path must be a string");
  const OptionReader reader(env, v.As<Napi::Object>());
  EngineOptions opts;
  for_each_engine_option(opts, [&](const char* name, auto& field) { reader.read(name, field); });
  return opts;
}

// EngineInfo's one JSON (engine/engine_info_json.h), parsed by V8: read at load and after a re-measured level only.
Napi::Value to_js(Napi::Env env, const EngineInfo& i) {
  auto parse = env.Global().Get("JSON").As<Napi::Object>().Get("parse").As<Napi::Function>();
  return parse.Call({Napi::String::New(env, engine_info_json(i).dump())});
}

AnswerRequest answer_request(Napi::Env env, const Napi::Value& v, const std::string& where) {
  if (!v.IsObject()) throw_bad_argument(env, where + " must be a request object");
  auto o = v.As<Napi::Object>();
  AnswerRequest req;
  req.state = int_list(env, o.Get("state"), where + "state");
  const OptionReader request_fields(env, o, where);
  for_each_request_field(req, [&](const char* name, auto& field) { request_fields.read(name, field); });
  req.images = image_list(env, o.Get("images"), where + "images");
  if (!o.Get("questions").IsArray()) throw_bad_argument(env, where + "questions must be an array");
  auto qs = o.Get("questions").As<Napi::Array>();
  for (uint32_t i = 0; i < qs.Length(); ++i) {
    const std::string name = where + "questions[" + std::to_string(i) + "]";
    Napi::Value qv = qs.Get(i);
    if (!qv.IsObject()) throw_bad_argument(env, name + " must be an object");
    auto q = qv.As<Napi::Object>();
    QuestionTokens spec;
    spec.tokens = int_list(env, q.Get("tokens"), name + ".tokens");
    spec.label_ids = int_list(env, q.Get("labelIds"), name + ".labelIds");
    const OptionReader fields(env, q, name + ".");
    for_each_question_field(spec, [&](const char* field_name, auto& field) { fields.read(field_name, field); });
    req.questions.push_back(std::move(spec));
  }
  return req;
}

Napi::Value to_js(Napi::Env env, const AnswerResult& r) {
  auto out = Napi::Object::New(env);
  auto answers = Napi::Array::New(env, r.answers.size());
  for (size_t i = 0; i < r.answers.size(); ++i) {
    auto a = Napi::Object::New(env);
    a.Set("labelLogits", float_array(env, r.answers[i].label_logits.data(), r.answers[i].label_logits.size()));
    a.Set("labelLogProbs", float_array(env, r.answers[i].label_log_probs.data(), r.answers[i].label_log_probs.size()));
    if (!r.answers[i].hidden.empty()) a.Set("hidden", float_array(env, r.answers[i].hidden.data(), r.answers[i].hidden.size()));
    answers.Set(static_cast<uint32_t>(i), a);
  }
  out.Set("answers", answers);
  auto timing = Napi::Object::New(env);
  timing.Set("stateMs", r.state_ms);
  timing.Set("questionsMs", r.questions_ms);
  timing.Set("readoutMs", r.readout_ms);
  timing.Set("planMs", r.plan_ms);
  out.Set("timing", timing);
  out.Set("stateTokens", static_cast<double>(r.state_tokens));
  out.Set("questionTokens", static_cast<double>(r.question_tokens));
  out.Set("cachedTokens", static_cast<double>(r.cached_tokens));
  out.Set("computedTokens", static_cast<double>(r.computed_tokens));
  out.Set("paddingTokens", static_cast<double>(r.padding_tokens));
  out.Set("graphReplays", static_cast<double>(r.graph_replays));
  out.Set("overlapped", r.overlapped);
  out.Set("boundaryTicket", static_cast<double>(r.boundary_ticket));
  return out;
}

Napi::Value to_js(Napi::Env env, const CacheStats& s) {
  return numbers(env, {{"lookups", s.lookups},
                       {"hitTokens", s.hit_tokens},
                       {"missTokens", s.miss_tokens},
                       {"hitBlocks", s.hit_blocks},
                       {"registeredBlocks", s.registered_blocks},
                       {"evictedBlocks", s.evicted_blocks},
                       {"cachedBlocks", s.cached_blocks},
                       {"freeBlocks", s.free_blocks},
                       {"totalBlocks", s.total_blocks},
                       {"salts", s.salts}});
}

Napi::Value to_js(Napi::Env env, const VisionCacheStats& s) {
  return numbers(env, {{"hits", s.hits}, {"misses", s.misses}, {"entries", s.entries}, {"bytes", s.bytes}, {"budgetBytes", s.budget_bytes}});
}

Napi::Value to_js(Napi::Env env, const MemoryStats& s) {
  return numbers(env, {{"attentionBufferBytes", s.attention_buffer_bytes},
                       {"attentionBufferKeptBytes", s.attention_buffer_kept_bytes},
                       {"cachedPrimitives", s.cached_primitives},
                       {"cachedPrimitivesMax", s.cached_primitives_max},
                       {"pendingBoundaries", s.pending_boundaries}});
}

}  // namespace tq::js
