// tq_cli answer's calls file and output as JSON: each request read by its named fields (engine/named_fields.h),
// a field of another type refused with its place; each result with its timings and the hidden state's checksums.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "engine/engine.h"
#include "kernels/aten/few_rows_gemm.h"

namespace tq::cli {

// The engine's info with the addon's keys (engine/engine_info_json.h).
nlohmann::json info_json(const EngineInfo& i);

// One request of the calls file; `where` names it in errors ("calls[0][1].").
AnswerRequest request_of(const nlohmann::json& j, const std::string& where);

nlohmann::json result_json(const AnswerResult& r);

// What the few-row GEMM chose for each shape and row bucket, and each form's trial: what the window reads beside the
// profile (which form runs `down` on a warm question, and what the others measured).
nlohmann::json gemm_forms_json(const FewRowsGemm& gemm);

}  // namespace tq::cli
