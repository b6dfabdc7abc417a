// The addon's conversions between JS values and the engine's C++ types, on the
// JS thread: arguments checked and turned into options and requests (a bad one
// throws a JS Error with code BAD_REQUEST, naming it), and the engine's results,
// stats and failures turned into the JS objects src/engine/native.ts declares.
#pragma once
#include <napi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace tq::js {

// An engine failure on its way to JS: an Error with a stable `code` and numeric `details`.
struct Failure {
  std::string code, message;
  std::map<std::string, int64_t> details;
};
Napi::Error to_js_error(Napi::Env env, const Failure& f);
[[noreturn]] void throw_bad_argument(Napi::Env env, const std::string& message);

// An Int32Array, Uint32Array or array of integers; `name` for the error.
std::vector<int64_t> int_list(Napi::Env env, const Napi::Value& v, const std::string& name);
// [{rgb: Uint8Array (height x width x 3), width, height, key: 64 hex digits}], or undefined.
std::vector<ImageInput> image_list(Napi::Env env, const Napi::Value& v, const std::string& name);
EngineOptions load_options(Napi::Env env, const Napi::Value& v);
// where: the request's place in its batch, prefixed to every error ("requests[2].").
AnswerRequest answer_request(Napi::Env env, const Napi::Value& v, const std::string& where);

Napi::Float32Array float_array(Napi::Env env, const float* data, size_t n);
Napi::Value to_js(Napi::Env env, const EngineInfo& info);
Napi::Value to_js(Napi::Env env, const AnswerResult& result);
Napi::Value to_js(Napi::Env env, const CacheStats& stats);
Napi::Value to_js(Napi::Env env, const VisionCacheStats& stats);
Napi::Value to_js(Napi::Env env, const MemoryStats& stats);

}  // namespace tq::js
