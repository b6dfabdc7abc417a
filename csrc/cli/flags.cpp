#include "cli/flags.h"

#include <cctype>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <type_traits>

#include "common/choices.h"
#include "common/errors.h"
#include "engine/named_fields.h"

namespace tq::cli {
namespace {

// Each command's flags: one it does not read is refused, never ignored.
// An engine option's flag: its load() name in kebab-case (blockSize: --block-size, cacheMiB: --cache-mib), the
// checkpoint's --model; none for the boundary registration, which needs a server to answer first (tq_cli registers a
// state's boundary before its questions).
std::optional<std::string> engine_flag(std::string_view option) {
  if (option == "path") return "model";
  if (option == "registerBoundary") return std::nullopt;
  std::string flag;
  for (size_t i = 0; i < option.size(); ++i) {
    const char c = option[i];
    const bool in_mib = c == 'B' && i >= 2 && option.substr(i - 2, 3) == "MiB";
    if (std::isupper(static_cast<unsigned char>(c)) && !in_mib) flag += '-';
    flag += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return flag;
}

std::set<std::string> engine_flags() {
  std::set<std::string> flags;
  tq::EngineOptions o;
  tq::for_each_engine_option(o, [&](const char* name, auto&) {
    if (const auto flag = engine_flag(name)) flags.insert(*flag);
  });
  return flags;
}

std::set<std::string> flags_of(const std::string& command) {
  auto with_engine = [](std::set<std::string> own) {
    const auto engine = engine_flags();
    own.insert(engine.begin(), engine.end());
    return own;
  };
  if (command == "answer") return with_engine({"calls", "repeat", "profile", "in-flight"});
  if (command == "selfcheck") return with_engine({"reference-kernels", "reference-device", "bound"});
  if (command == "readout") return with_engine({"labels", "iterations"});
  if (command == "gemm") return {"m", "k", "n", "dtype", "batch-invariant", "isa", "quantization", "arithmetic", "iterations", "threads"};
  if (command == "gemm-rows") return {"device", "rows", "shapes", "time"};
  throw tq::EngineError(tq::code::kBadRequest, "unknown command " + command + " (answer, gemm, gemm-rows, readout, selfcheck)");
}

// A flag's value as an engine option's type: on|off, a number, a choice by its table (common/choices.h).
void read_flag(const std::string& flag, const std::string& value, std::string& into) { into = value; }
void read_flag(const std::string& flag, const std::string& value, bool& into) {
  if (value != "on" && value != "off") throw tq::EngineError(tq::code::kBadRequest, "--" + flag + " must be on or off, got " + value);
  into = value == "on";
}
void read_flag(const std::string& flag, const std::string& value, std::optional<bool>& into) {
  bool on = false;
  read_flag(flag, value, on);
  into = on;
}
template <class N>
std::enable_if_t<std::is_arithmetic_v<N>> read_flag(const std::string& flag, const std::string& value, N& into) {
  size_t used = 0;
  long long whole = 0;
  double number = 0;
  try {
    if constexpr (std::is_integral_v<N>) whole = std::stoll(value, &used);
    else number = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const bool fits = !std::is_integral_v<N> || (whole >= std::numeric_limits<N>::min() && whole <= std::numeric_limits<N>::max());
  if (value.empty() || used != value.size() || !fits)
    throw tq::EngineError(tq::code::kBadRequest, "--" + flag + " must be " + (std::is_integral_v<N> ? "an integer" : "a number") + ", got " + value);
  into = std::is_integral_v<N> ? static_cast<N>(whole) : static_cast<N>(number);
}
template <class E>
auto read_flag(const std::string&, const std::string& value, E& into) -> decltype(tq::ChoiceTable<E>::values, void()) {
  into = tq::parse_option<E>(value);
}
template <class E>
auto read_flag(const std::string&, const std::string& value, std::optional<E>& into) -> decltype(tq::ChoiceTable<E>::values, void()) {
  into = tq::parse_option<E>(value);
}

}  // namespace

Args parse(int argc, char** argv) {
  if (argc < 2) throw tq::EngineError(tq::code::kBadRequest, "usage: tq_cli answer|gemm|gemm-rows|readout|selfcheck --flag value ... (see csrc/cli/main.cpp)");
  Args a;
  a.command = argv[1];
  const auto known = flags_of(a.command);
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0) throw tq::EngineError(tq::code::kBadRequest, "unexpected argument " + flag);
    flag = flag.substr(2);
    if (!known.count(flag)) throw tq::EngineError(tq::code::kBadRequest, "tq_cli " + a.command + " has no flag --" + flag + " (see csrc/cli/main.cpp)");
    if (i + 1 < argc) a.values[flag] = argv[++i];
    else throw tq::EngineError(tq::code::kBadRequest, "--" + flag + " needs a value");
  }
  return a;
}

bool on_off(const Args& a, const std::string& flag, const std::string& fallback) {
  const auto value = a.get(flag, fallback);
  if (value != "on" && value != "off") throw tq::EngineError(tq::code::kBadRequest, "--" + flag + " must be on or off, got " + value);
  return value == "on";
}

tq::EngineOptions engine_options(const Args& a) {
  tq::EngineOptions o;
  o.register_boundary = tq::BoundaryRegistration::Before;  // no server answers before a boundary would be registered
  tq::for_each_engine_option(o, [&](const char* name, auto& field) {
    const auto flag = engine_flag(name);
    if (flag && a.has(*flag)) read_flag(*flag, a.values.at(*flag), field);
  });
  return o;
}

}  // namespace tq::cli
