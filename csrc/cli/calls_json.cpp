#include "cli/calls_json.h"

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/errors.h"
#include "engine/engine_info_json.h"
#include "engine/named_fields.h"

namespace tq::cli {
namespace {

using nlohmann::json;

// An image from a file of raw RGB bytes, keyed by its content (the server's key is a SHA-256; any key
// that differs between different pixels serves the vision cache).
tq::ImageInput image_of(const json& j) {
  const auto width = j.at("width").get<int64_t>(), height = j.at("height").get<int64_t>();
  std::ifstream in(j.at("rgb").get<std::string>(), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(bytes.size()) != width * height * 3) throw std::runtime_error("image " + j.at("rgb").get<std::string>() + ": not width x height x 3 bytes");
  tq::ImageInput image;
  image.rgb = at::from_blob(bytes.data(), {height, width, 3}, at::kByte).clone();
  const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  image.key = {std::hash<std::string_view>{}(view), static_cast<uint64_t>(width), static_cast<uint64_t>(height), 0};
  return image;
}

// A request's fields that may be left out, read from the calls file by type (engine/named_fields.h): an absent (or
// null) one keeps its default, one of another type is refused with its place, never ignored.
class JsonFields {
 public:
  JsonFields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}
  template <class T>
  void read(const char* key, T& into) const {
    if (!j_.contains(key) || j_.at(key).is_null()) return;
    const json& v = j_.at(key);
    const bool fits = std::is_same_v<T, bool> ? v.is_boolean() : std::is_same_v<T, std::string> ? v.is_string()
                      : std::is_integral_v<T> ? v.is_number_integer() : v.is_number();
    if (!fits) throw tq::EngineError(tq::code::kBadRequest, where_ + key + " must be " + kind<T>());
    into = v.get<T>();
  }

 private:
  template <class T>
  static const char* kind() {
    return std::is_same_v<T, bool> ? "true or false" : std::is_same_v<T, std::string> ? "a string" : std::is_integral_v<T> ? "an integer" : "a number";
  }
  const json& j_;
  std::string where_;
};

}  // namespace

json info_json(const tq::EngineInfo& i) { return json::parse(tq::engine_info_json(i).dump()); }

tq::AnswerRequest request_of(const json& j, const std::string& where) {
  tq::AnswerRequest r;
  r.want_hidden = true;  // unless the request says otherwise: the output's checksums read the hidden state
  r.state = j.at("state").get<std::vector<int64_t>>();
  const JsonFields fields(j, where);
  tq::for_each_request_field(r, [&](const char* name, auto& field) { fields.read(name, field); });
  if (j.contains("images"))
    for (const auto& im : j.at("images")) r.images.push_back(image_of(im));
  for (size_t i = 0; i < j.at("questions").size(); ++i) {
    const json& q = j.at("questions").at(i);
    tq::QuestionTokens s;
    s.tokens = q.at("tokens").get<std::vector<int64_t>>();
    s.label_ids = q.at("labelIds").get<std::vector<int64_t>>();
    const JsonFields question(q, where + "questions[" + std::to_string(i) + "].");
    tq::for_each_question_field(s, [&](const char* name, auto& field) { question.read(name, field); });
    r.questions.push_back(std::move(s));
  }
  return r;
}

json result_json(const tq::AnswerResult& r) {
  json answers = json::array();
  for (const auto& a : r.answers) {
    double sum = 0, abs_sum = 0;
    for (float h : a.hidden) {
      sum += h;
      abs_sum += std::abs(h);
    }
    answers.push_back({{"labelLogits", a.label_logits}, {"labelLogProbs", a.label_log_probs}, {"hiddenSum", sum}, {"hiddenAbsSum", abs_sum}});
  }
  return {{"answers", answers},
          {"stateMs", r.state_ms},
          {"questionsMs", r.questions_ms},
          {"readoutMs", r.readout_ms},
          {"planMs", r.plan_ms},
          {"graphLaunchMs", r.graph_launch_ms},
          {"graphLaunches", r.graph_launches},
          {"cachedTokens", r.cached_tokens},
          {"computedTokens", r.computed_tokens}, {"paddingTokens", r.padding_tokens}, {"graphReplays", r.graph_replays}};
}

json gemm_forms_json(const tq::FewRowsGemm& gemm) {
  json out = json::array();
  for (const auto& [key, choice] : gemm.choices()) {
    const auto& [n, k, dtype, bucket] = key;
    json trials = json::array();
    for (const auto& t : choice.trials) trials.push_back({{"form", tq::gemm_form_name(t.form)}, {"us", t.us}, {"sameBits", t.same_bits}});
    out.push_back({{"out", n}, {"in", k}, {"dtype", c10::toString(static_cast<at::ScalarType>(dtype))}, {"rowBucket", bucket},
                   {"form", tq::gemm_form_name(choice.form)}, {"trials", trials}});
  }
  return out;
}

}  // namespace tq::cli
