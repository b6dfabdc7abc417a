// EngineInfo as JSON, one set of keys for everyone who reads it: the addon hands it to JavaScript (the
// server's /health and start-up line, src/engine/native.ts's NativeEngineInfo), tq_cli prints it (the GPU
// window's scripts read it). Ordered: the measured levels' rates stay fastest first.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace tq {

nlohmann::ordered_json engine_info_json(const EngineInfo& info);

}  // namespace tq
