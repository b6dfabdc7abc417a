// tq_cli: the engine library without Node. It is what the GPU check runs on
// a machine that has CUDA and a libtorch but no Node, and where the
// microbenchmarks live (they are not in the production addon).
//
//   tq_cli answer --model DIR --calls FILE.json [--dtype fp32|bf16] [--device cpu|cuda] [--kernels engine|aten|fused] [--attention direct|cascade] [--cuda-graphs on|off]
//                 [--threads N] [--block-size N] [--max-step-tokens N] [--cache-mib N] [--gpu-memory-utilization F] [--prefix-cache on|off]
//                 [--batch-invariant on|off] [--isa avx512-bf16|avx512|avx2|generic] [--quantization none|int8|fp8] [--repeat N]
//                 [--profile TRACE.json] [--in-flight 1|2]
//       Every engine option is a flag of answer, selfcheck and readout: its load() name in kebab-case
//       (engine/named_fields.h; those above, and --arithmetic, --cache-tokens, --context-limit, --vision-cache-mib,
//       --buffer-shift).
//       --kernels, --attention, --cuda-graphs unset: by device (EngineOptions): the engine's kernels on the CPU, fused
//       with CUDA graphs on CUDA
//       FILE.json: {"calls": [[request, ...], ...]}, each call one answer_batch of requests
//       {"state": [ids], "questions": [{"tokens": [ids], "labelIds": [ids], "readoutIndex": i, "temperature": t}],
//        "wantHidden": bool (true unless false: the checksums read it), "cacheSalt": string,
//        "images": [{"rgb": FILE of raw RGB bytes, "width": W, "height": H}] (a vision-language model: one
//        <|image_pad|> per image in the state; sides multiples of 28, as the server's recipe sizes them)}.
//       Prints {"info", "calls": [[{"labelLogits", "labelLogProbs", "hiddenSum", "hiddenAbsSum", ...}]],
//       "wallMs": [per repeat, per call]} as JSON: the calls run in order, --repeat times over; "calls" are
//       the last repetition's results. Where the few-row GEMM's forms are chosen (CUDA, batch-invariant), "gemmForms":
//       [{"out", "in", "dtype", "rowBucket", "form", "trials": [{"form", "us", "sameBits"}]}], each shape's choice.
//       --in-flight 2: each call launched before the one before it is finished, as the engine thread runs calls
//       that queue (addon/engine_thread.h): the host's work for a call overlaps the device's for the one before.
//       A call's wallMs is then from its launch to its finish; "repeatMs" is each repetition's whole wall time.
//       --profile: the last repetition recorded by libtorch's profiler into a Chrome trace, each call in a user scope
//       "tq_cli call N" (cli/call_profile.h); bench/gpu/kernel_profile.py ranks its kernels (or CPU ops) per call.
//   tq_cli gemm --m M --k K --n N [--dtype] [--batch-invariant on|off] [--isa ...] [--quantization none|int8] [--iterations N] [--threads N]
//       Prints {"gflops", "ms", "isa"}: the fastest of the iterations, and the level the invariant (or int8) GEMM ran at.
//   tq_cli gemm-rows [--device cuda] [--rows 1,8,24,32,64,128] [--shapes 4096x1024,1024x2048,6144x1024,1024x3072] [--time on|off]
//       The few-row GEMM of our own, each tiling, against cuBLAS, bf16, on each OUTxIN and row count (CUDA builds, CUDA
//       devices): prints {"timed", "trials": [{"rows", "out", "in", "linearSameBits", "linearUs", "own": [{"form", "sameBits",
//       "maxAbsDiff", "us"}]}]}, the bits against the same rows of a cold state's 1,024-row GEMM (cli/gemm_rows_probe.h).
//       --time off: each GEMM launched once and nothing timed (µs 0), for a profiler (bench/gpu/kernel_counters.py).
//   tq_cli selfcheck --model DIR [--device] [--dtype] [--kernels fused] [--reference-kernels aten] [--reference-device D] [--bound B]
//       Runs one request (a state, three questions, two sharing their first tokens) through two forward paths and
//       compares their intermediate tensors layer by layer (model/transformer.h, ForwardTrace): prints each tensor's
//       largest difference relative to its scale, and the first beyond the bound (fp32 1e-4, bf16 5e-2 by default).
//       The engine flags are both paths'; --state-attention the reference's only where it runs the cascade too.
//   tq_cli readout --model DIR [--dtype] [--device] [--labels N] [--iterations N]
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "cli/call_profile.h"
#include "cli/calls_json.h"
#include "cli/flags.h"
#include "cli/gemm_rows_probe.h"
#include "cli/microbench.h"
#include "model/transformer.h"
#include "common/clock.h"
#include "common/errors.h"
#include "engine/engine.h"
#include "engine/intra_op_threads.h"
#include "engine/launched_batch.h"
#include "kernels/aten/few_rows_gemm.h"
#include "kernels/cpu/cpu_layer_kernels.h"
#include "kernels/cpu/gemm/invariant_gemm.h"

namespace {

using nlohmann::json;
using tq::cli::Args;
using tq::cli::engine_options;
using tq::cli::gemm_forms_json;
using tq::cli::info_json;
using tq::cli::on_off;
using tq::cli::request_of;
using tq::cli::result_json;

json answer(const Args& a) {
  std::ifstream in(a.get("calls"));
  if (!in) throw tq::EngineError(tq::code::kBadRequest, "--calls: cannot read " + a.get("calls"));
  const json input = json::parse(in);
  std::vector<std::vector<tq::AnswerRequest>> calls;
  for (size_t c = 0; c < input.at("calls").size(); ++c) {
    calls.emplace_back();
    const json& call = input.at("calls").at(c);
    for (size_t i = 0; i < call.size(); ++i) calls.back().push_back(request_of(call.at(i), "calls[" + std::to_string(c) + "][" + std::to_string(i) + "]."));
  }
  const auto device = tq::parse_device(a.get("device", "cpu"));
  const int64_t free_at_start = tq::describe_device(device).free_bytes;  // after the CUDA context exists
  tq::Engine engine(engine_options(a));
  json out{{"info", info_json(engine.info())}, {"calls", json::array()}, {"wallMs", json::array()}};
  const int64_t repeat = a.number("repeat", 1);
  const int64_t in_flight = a.number("in-flight", 1);
  if (in_flight != 1 && in_flight != 2) throw tq::EngineError(tq::code::kBadRequest, "answer --in-flight must be 1 or 2");
  out["repeatMs"] = json::array();
  for (int64_t rep = 0; rep < repeat; ++rep) {
    json walls = json::array();
    // The last repetition is the one profiled: warm (graphs captured, the cache filled where it is on).
    std::optional<tq::cli::CallProfile> profile;
    if (a.has("profile") && rep == repeat - 1) profile.emplace(a.get("profile"), device.is_cuda());
    const auto rep_t0 = std::chrono::steady_clock::now();
    std::vector<std::chrono::steady_clock::time_point> launched_at(calls.size());
    std::unique_ptr<tq::LaunchedBatch> unfinished;  // the call before, with --in-flight 2
    const auto finish = [&](size_t c) {
      const auto results = engine.finish_batch(*unfinished);  // returns once the readout is on the host
      unfinished.reset();
      walls.push_back(tq::ms_since(launched_at[c]));
      if (rep == repeat - 1) {  // the last repetition: warm where the prefix cache is on
        json call = json::array();
        for (const auto& r : results) call.push_back(result_json(r));
        out["calls"].push_back(call);
      }
    };
    for (size_t c = 0; c < calls.size(); ++c) {
      launched_at[c] = std::chrono::steady_clock::now();
      std::unique_ptr<tq::LaunchedBatch> launched;
      {
        RECORD_USER_SCOPE(tq::cli::call_scope_name(c));
        launched = engine.launch_batch(calls[c]);
        if (in_flight == 1) {
          unfinished = std::move(launched);
          finish(c);
          continue;
        }
      }
      if (unfinished) finish(c - 1);
      unfinished = std::move(launched);
    }
    if (unfinished) finish(calls.size() - 1);
    out["repeatMs"].push_back(tq::ms_since(rep_t0));
    out["wallMs"].push_back(walls);
    if (profile) profile->stop();
  }
  out["cache"] = {{"hitTokens", engine.cache_stats().hit_tokens}, {"missTokens", engine.cache_stats().miss_tokens}};
  if (const auto* gemm = engine.few_rows_gemm()) out["gemmForms"] = gemm_forms_json(*gemm);
  // GPU memory this process took (weights, KV cache, the allocator's pool; not the CUDA context), as
  // the driver counts it: the device's free memory at the start less at the end.
  out["gpuUsedBytes"] = free_at_start - tq::describe_device(device).free_bytes;
  return out;
}

// A choice flag of `tq_cli gemm`, read through its table (common/choices.h): "gemm --dtype must be fp32 or bf16, got fp16".
template <class E>
E gemm_choice(const Args& a, const std::string& flag, const std::string& fallback) {
  try {
    return tq::parse_choice<E>(a.get(flag, fallback));
  } catch (const std::invalid_argument& e) {
    throw tq::EngineError(tq::code::kBadRequest, std::string("gemm --") + e.what());
  }
}

json gemm(const Args& a) {
  if (a.has("threads")) tq::set_intra_op_threads(static_cast<int>(a.number("threads", 1)));
  const auto dtype = gemm_choice<at::ScalarType>(a, "dtype", "fp32");
  // The CPU's quantizations only: a subset of the table's.
  const auto quantization = a.get("quantization", "none");
  if (quantization != "none" && quantization != "int8")
    throw tq::EngineError(tq::code::kBadRequest, "gemm --quantization must be none or int8 (the CPU's), got " + quantization);
  const auto isa = tq::isa_for(a.get("isa"));
  const bool int8 = quantization == "int8";
  const bool native = gemm_choice<tq::Arithmetic>(a, "arithmetic", "portable") == tq::Arithmetic::Native;
  if (native && !tq::native_arithmetic_available()) throw tq::EngineError(tq::code::kBadRequest, "gemm --arithmetic native: this CPU has no AMX-BF16");
  const auto r = tq::measure_gemm(a.number("m", 512), a.number("k", 896), a.number("n", 4864), dtype,
                                  static_cast<int>(a.number("iterations", 10)), on_off(a, "batch-invariant", "on"), isa, int8, native);
  return {{"gflops", r.gflops}, {"ms", r.ms},
          {"isa", int8 ? tq::int8_kernel_name(isa) : native ? "amx-bf16" : tq::isa_name(tq::invariant_gemm::level_for(isa, dtype == at::kBFloat16))}};
}

json selfcheck(const Args& a) {
  auto options = engine_options(a);
  options.prefix_cache = false;
  auto reference_options = options;
  options.kernels = tq::parse_option<tq::ForwardKernels>(a.get("kernels", "fused"));
  reference_options.kernels = tq::parse_option<tq::ForwardKernels>(a.get("reference-kernels", "aten"));
  reference_options.device = a.get("reference-device", options.device);
  // A reference without the cascade has no state tier: --state-attention is then the candidate's alone.
  if (reference_options.kernels != tq::ForwardKernels::Fused && reference_options.attention != tq::AttentionForm::Cascade)
    reference_options.state_attention = tq::StateAttention::Varlen;
  tq::Engine reference(reference_options), candidate(options);
  const int64_t vocab = reference.info().vocab_size;
  auto ids = [&](int64_t n, int64_t seed) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(3 + (seed * 7919 + i * 104729) % (vocab - 3));
    return v;
  };
  tq::AnswerRequest request;
  request.state = ids(40, 1);
  const auto labels = ids(4, 2);
  auto shared = ids(3, 3), q1 = ids(5, 4), q2 = ids(6, 5);
  auto with = [](std::vector<int64_t> a, const std::vector<int64_t>& b) { a.insert(a.end(), b.begin(), b.end()); return a; };
  for (const auto& tokens : {with(shared, q1), with(shared, q2), ids(7, 6)}) request.questions.push_back({tokens, labels});
  tq::ForwardTrace ref_trace, trace;
  reference.trace_forward(&ref_trace);
  candidate.trace_forward(&trace);
  const auto expected = reference.answer_batch({request}), got = candidate.answer_batch({request});
  const double bound = a.has("bound") ? std::stod(a.values.at("bound")) : (options.dtype == at::kBFloat16 ? 5e-2 : 1e-4);
  json tensors = json::array(), first = nullptr;
  for (size_t i = 0; i < std::min(ref_trace.tensors.size(), trace.tensors.size()); ++i) {
    const auto& [name, r] = ref_trace.tensors[i];
    const auto& t = trace.tensors[i].second;
    json row{{"name", name}, {"other", trace.tensors[i].first}};
    if (r.sizes() != t.sizes()) {
      row["error"] = "shapes differ";
    } else {
      const double diff = (r - t).abs().max().item<double>(), scale = std::max(1.0, r.abs().max().item<double>());
      row["maxAbsDiff"] = diff;
      row["relative"] = diff / scale;
    }
    if (first.is_null() && (row.contains("error") || row["relative"].get<double>() > bound)) first = row;
    tensors.push_back(row);
  }
  double logits = 0;
  for (size_t q = 0; q < expected[0].answers.size(); ++q)
    for (size_t l = 0; l < labels.size(); ++l)
      logits = std::max(logits, static_cast<double>(std::abs(expected[0].answers[q].label_logits[l] - got[0].answers[q].label_logits[l])));
  return {{"reference", info_json(reference.info())}, {"candidate", info_json(candidate.info())}, {"bound", bound},
          {"tensorsCompared", tensors.size()}, {"sameTensorCount", ref_trace.tensors.size() == trace.tensors.size()},
          {"firstBeyondBound", first}, {"labelLogitsMaxDiff", logits}, {"tensors", tensors}};
}

// The few-row GEMM of our own against cuBLAS on a cold state's rows (cli/gemm_rows_probe.h): --rows a list (1,...,128:
// one row is cuBLAS's matrix-vector product, few_rows_gemm.cpp), --shapes out x in pairs (bench-qwen3's q/k/v, o, gate
// and up, down by default).
json gemm_rows(const Args& a) {
  const auto list = [](const std::string& text) {
    std::vector<std::string> items;
    for (size_t at = 0; at <= text.size();) {
      const size_t comma = std::min(text.find(',', at), text.size());
      items.push_back(text.substr(at, comma - at));
      at = comma + 1;
    }
    return items;
  };
  const auto positive = [](const std::string& text, const std::string& flag) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size() || value <= 0) throw tq::EngineError(tq::code::kBadRequest, "gemm-rows --" + flag + ": " + text + " is not a positive integer");
    return static_cast<int64_t>(value);
  };
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const auto& shape : list(a.get("shapes", "4096x1024,1024x2048,6144x1024,1024x3072"))) {
    const size_t x = shape.find('x');
    if (x == std::string::npos) throw tq::EngineError(tq::code::kBadRequest, "gemm-rows --shapes: " + shape + " is not OUTxIN");
    shapes.emplace_back(positive(shape.substr(0, x), "shapes"), positive(shape.substr(x + 1), "shapes"));
  }
  std::vector<int64_t> row_counts;
  for (const auto& rows : list(a.get("rows", "1,8,24,32,64,128"))) row_counts.push_back(positive(rows, "rows"));
  const at::Device device(a.get("device", "cuda"));
  const bool timed = on_off(a, "time", "on");
  json trials = json::array();
  for (const auto& [out, in] : shapes) {
    for (const int64_t rows : row_counts) {
      const auto t = tq::probe_own_gemm(rows, out, in, device, timed);
      json own = json::array();
      for (const auto& o : t.own) own.push_back({{"form", o.form}, {"sameBits", o.same_bits}, {"maxAbsDiff", o.max_abs_diff}, {"us", o.us}});
      trials.push_back({{"rows", t.rows}, {"out", t.out}, {"in", t.in}, {"linearSameBits", t.linear_same_bits}, {"linearUs", t.linear_us}, {"own", own}});
    }
  }
  return {{"timed", timed}, {"trials", trials}};
}

json readout(const Args& a) {
  tq::Engine engine(engine_options(a));
  const auto r = tq::measure_readout(engine.model().lm_head(), a.number("labels", 8), static_cast<int>(a.number("iterations", 20)));
  return {{"readoutMs", r.readout_ms}, {"fullMs", r.full_ms}, {"info", info_json(engine.info())}};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = tq::cli::parse(argc, argv);
    json out;
    if (args.command == "answer") out = answer(args);
    else if (args.command == "gemm") out = gemm(args);
    else if (args.command == "gemm-rows") out = gemm_rows(args);
    else if (args.command == "readout") out = readout(args);
    else out = selfcheck(args);  // parse() knows no other
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const tq::EngineError& e) {
    std::cerr << json{{"error", {{"code", e.code()}, {"message", e.what()}}}}.dump() << std::endl;
  } catch (const c10::Error& e) {
    std::cerr << json{{"error", {{"code", tq::code::kTorch}, {"message", e.what_without_backtrace()}}}}.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << json{{"error", {{"code", tq::code::kInternal}, {"message", e.what()}}}}.dump() << std::endl;
  }
  return 2;
}
