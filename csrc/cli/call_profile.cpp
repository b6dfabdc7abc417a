#include "cli/call_profile.h"

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <fstream>
#include <set>
#include <utility>

#include "common/errors.h"

namespace tq::cli {
namespace {

namespace prof = torch::autograd::profiler;

// An event's start and duration in microseconds, the Chrome trace's unit; from nanoseconds where this libtorch has them
// (a short kernel is a few µs).
std::pair<double, double> span_us(const prof::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return {static_cast<double>(e.startNs()) / 1000.0, static_cast<double>(e.durationNs()) / 1000.0};
#else
  return {static_cast<double>(e.startUs()), static_cast<double>(e.durationUs())};
#endif
}

// The recorded events in the Chrome trace format Kineto writes, for a libtorch without Kineto: its CPU ops as
// "cpu_op", its user scopes as "user_annotation" (the only kinds such a libtorch records).
void write_events(const prof::ProfilerResult& result, const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  const auto user_scope = static_cast<uint8_t>(at::RecordScope::USER_SCOPE);
  for (const auto& e : result.events()) {
    const auto [start, duration] = span_us(e);
    events.push_back({{"ph", "X"}, {"cat", e.scope() == user_scope ? "user_annotation" : "cpu_op"}, {"name", e.name()},
                      {"ts", start}, {"dur", duration}, {"pid", 0}, {"tid", e.startThreadId()}});
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"writer", "tq_cli (no Kineto in this libtorch)"}}.dump() << "\n";
  if (!out) throw EngineError(code::kInternal, "--profile: cannot write " + path);
}

std::set<prof::ActivityType> activities(bool with_cuda) {
  std::set<prof::ActivityType> a{prof::ActivityType::CPU};
  if (with_cuda) a.insert(prof::ActivityType::CUDA);
  return a;
}

}  // namespace

CallProfile::CallProfile(std::string path, bool with_cuda) : path_(std::move(path)) {
  // Refused before any work is done (Kineto's writer only logs a path it cannot write).
  if (!std::ofstream(path_)) throw EngineError(code::kBadRequest, "--profile: cannot write " + path_);
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  prof::prepareProfiler(config, activities(with_cuda));
  prof::enableProfiler(config, activities(with_cuda));
  recording_ = true;
}

CallProfile::~CallProfile() {
  if (!recording_) return;
  try {
    prof::disableProfiler();
  } catch (...) {  // already unwinding from the call's own error, which is the one to report
  }
}

void CallProfile::stop() {
  recording_ = false;
  const auto result = prof::disableProfiler();
  try {
    result->save(path_);  // Kineto's trace: GPU kernels with their correlation to the launching runtime call
  } catch (const c10::Error&) {  // "Saving a trace requires ... Kineto support"
    write_events(*result, path_);
  }
}

std::string call_scope_name(size_t call) { return "tq_cli call " + std::to_string(call); }

}  // namespace tq::cli
