#include "runner/launch_record.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tq {
namespace {

thread_local std::vector<std::string>* recording = nullptr;

std::string describe(const c10::IValue& v) {
  std::ostringstream out;
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined()) return "undefined";
    out << c10::toString(t.scalar_type()) << t.sizes() << (t.is_contiguous() ? "" : "strided");
  } else if (v.isInt() || v.isDouble() || v.isBool() || v.isIntList() || v.isString() || v.isNone() || v.isScalar()) {
    out << v;
  } else {
    out << v.tagKind();
  }
  return out.str();
}

std::unique_ptr<at::ObserverContext> on_launch(const at::RecordFunction& fn) {
  if (!recording) return nullptr;
  std::string line = fn.name();
  line += '(';
  const auto inputs = fn.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) line += (i ? ", " : "") + describe(inputs[i]);
  recording->push_back(line + ')');
  return nullptr;
}

}  // namespace

LaunchRecord::LaunchRecord() {
  if (recording) throw std::logic_error("LaunchRecord: this thread records already");
  recording = &launches_;
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_launch).needsInputs(true));
}

LaunchRecord::~LaunchRecord() {
  at::removeCallback(handle_);
  recording = nullptr;
}

std::string first_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(none)", y = i < b.size() ? b[i] : "(none)";
    if (x != y) return "launch " + std::to_string(i) + ": " + x + " against " + y;
  }
  return "";
}

}  // namespace tq
