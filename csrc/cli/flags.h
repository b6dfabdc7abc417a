// tq_cli's flags: each command's declared once (flags_of), any other refused, never ignored; the engine's read
// into EngineOptions by their load() names (engine/named_fields.h), as the addon reads its options.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/engine_options.h"

namespace tq::cli {

struct Args {
  std::string command;
  std::map<std::string, std::string> values;
  bool has(const std::string& k) const { return values.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback = "") const { return has(k) ? values.at(k) : fallback; }
  int64_t number(const std::string& k, int64_t fallback) const { return has(k) ? std::stoll(values.at(k)) : fallback; }
};

// The command (argv[1]) and its flags; an unknown command or flag, or one without its value, is an EngineError.
Args parse(int argc, char** argv);

// An on|off flag's value, `fallback` where it is not given.
bool on_off(const Args& a, const std::string& flag, const std::string& fallback);

// The engine's options from the flags given; a flag not given keeps EngineOptions' default.
EngineOptions engine_options(const Args& a);

}  // namespace tq::cli
