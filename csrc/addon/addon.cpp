// The Node-API surface (declared in src/engine/native.ts). Each method turns
// its JS arguments into C++ values on the JS thread (js_values.h), runs the
// work on the engine thread, and settles a Promise through a thread-safe
// function. Every C++/torch error becomes a JS Error with a stable `code` and
// `details`.
#include <napi.h>

#include <memory>
#include <optional>

#include "addon/engine_thread.h"
#include "addon/js_values.h"
#include "engine/engine.h"
#include "common/errors.h"

namespace {

using tq::EngineError;
using tq::js::Failure;
using tq::js::throw_bad_argument;
using tq::js::to_js_error;

class NativeEngine : public Napi::ObjectWrap<NativeEngine> {
 public:
  static Napi::Object Init(Napi::Env env, Napi::Object exports) {
    auto cls = DefineClass(env, "NativeEngine",
                           {InstanceMethod("load", &NativeEngine::Load), InstanceMethod("answerBatch", &NativeEngine::AnswerBatch),
                            InstanceMethod("logitsAll", &NativeEngine::LogitsAll), InstanceMethod("close", &NativeEngine::Close),
                            InstanceMethod("registerBoundary", &NativeEngine::RegisterBoundary),
                            InstanceMethod("cacheStats", &NativeEngine::CacheStats),
                            InstanceMethod("visionCacheStats", &NativeEngine::VisionCacheStats),
                            InstanceMethod("memoryStats", &NativeEngine::MemoryStats),
                            InstanceMethod("remeasureLevel", &NativeEngine::RemeasureLevel),
                            InstanceMethod("setBusyPoll", &NativeEngine::SetBusyPoll),
                            InstanceMethod("threadSleeps", &NativeEngine::ThreadSleeps)});
    exports.Set("NativeEngine", cls);
    return exports;
  }

  explicit NativeEngine(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeEngine>(info), thread_(std::make_unique<tq::EngineThread>()) {}
  ~NativeEngine() override { thread_->stop(); }

 private:
  // Runs `work` on the engine thread; `to_js` converts its result on the JS thread.
  template <typename R>
  Napi::Value schedule(Napi::Env env, std::function<R()> work, std::function<Napi::Value(Napi::Env, R&)> to_js) {
    auto deferred = Napi::Promise::Deferred::New(env);
    if (closed_) {
      deferred.Reject(to_js_error(env, Failure{tq::code::kClosed, "the engine is closed", {}}).Value());
      return deferred.Promise();
    }
    auto tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "tqserve-engine", 0, 1);
    Ref();  // keep this wrapper alive while the job is pending
    struct Outcome {
      std::optional<R> value;
      Failure failure;
    };
    thread_->post([this, work, to_js, deferred, tsfn]() mutable {
      auto* outcome = new Outcome;
      try {
        outcome->value = work();
      } catch (const EngineError& e) {
        outcome->failure = {e.code(), e.what(), e.details()};
      } catch (const c10::Error& e) {
        outcome->failure = {tq::code::kTorch, e.what_without_backtrace(), {}};
      } catch (const std::exception& e) {
        outcome->failure = {tq::code::kInternal, e.what(), {}};
      }
      tsfn.BlockingCall(outcome, [this, to_js, deferred](Napi::Env env, Napi::Function, Outcome* o) {
        try {
          if (o->value) deferred.Resolve(to_js(env, *o->value));
          else deferred.Reject(to_js_error(env, o->failure).Value());
        } catch (const Napi::Error& e) {
          deferred.Reject(e.Value());
        }
        delete o;
        Unref();
      });
      tsfn.Release();
    });
    return deferred.Promise();
  }

  Napi::Value Load(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    const auto opts = tq::js::load_options(env, info[0]);
    return schedule<tq::EngineInfo>(
        env,
        [this, opts] {
          engine_ = std::make_unique<tq::Engine>(opts);
          return engine_->info();
        },
        [](Napi::Env env, tq::EngineInfo& i) { return tq::js::to_js(env, i); });
  }

  tq::Engine& loaded() {
    if (!engine_) throw EngineError(tq::code::kNotLoaded, "no model is loaded");
    return *engine_;
  }

  Napi::Value AnswerBatch(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    if (!info[0].IsArray()) throw_bad_argument(env, "answerBatch(requests) needs an array of requests");
    auto list = info[0].As<Napi::Array>();
    std::vector<tq::AnswerRequest> reqs;
    for (uint32_t i = 0; i < list.Length(); ++i)
      reqs.push_back(tq::js::answer_request(env, list.Get(i), list.Length() > 1 ? "requests[" + std::to_string(i) + "]." : ""));
    return schedule<std::vector<tq::AnswerResult>>(
        env, [this, reqs] { return loaded().answer_batch(reqs); },
        [](Napi::Env env, std::vector<tq::AnswerResult>& results) -> Napi::Value {
          auto out = Napi::Array::New(env, results.size());
          for (size_t i = 0; i < results.size(); ++i) out.Set(static_cast<uint32_t>(i), tq::js::to_js(env, results[i]));
          return out;
        });
  }

  Napi::Value LogitsAll(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    auto tokens = tq::js::int_list(env, info[0], "tokens");
    auto images = tq::js::image_list(env, info[1], "images");
    return schedule<at::Tensor>(
        env, [this, tokens, images] { return loaded().logits_all(tokens, images); },
        [](Napi::Env env, at::Tensor& t) -> Napi::Value {
          auto out = Napi::Object::New(env);
          out.Set("logits", tq::js::float_array(env, t.data_ptr<float>(), static_cast<size_t>(t.numel())));
          out.Set("vocabSize", static_cast<double>(t.size(1)));
          return out;
        });
  }

  Napi::Value RegisterBoundary(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    if (!info[0].IsNumber()) throw_bad_argument(env, "registerBoundary(ticket) needs a ticket number");
    const int64_t ticket = info[0].As<Napi::Number>().Int64Value();
    return schedule<bool>(
        env, [this, ticket] { return loaded().register_boundary(ticket); },
        [](Napi::Env env, bool& ok) -> Napi::Value { return Napi::Boolean::New(env, ok); });
  }

  Napi::Value CacheStats(const Napi::CallbackInfo& info) {
    return schedule<tq::CacheStats>(
        info.Env(), [this] { return loaded().cache_stats(); },
        [](Napi::Env env, tq::CacheStats& s) { return tq::js::to_js(env, s); });
  }

  Napi::Value VisionCacheStats(const Napi::CallbackInfo& info) {
    return schedule<tq::VisionCacheStats>(
        info.Env(), [this] { return loaded().vision_cache_stats(); },
        [](Napi::Env env, tq::VisionCacheStats& s) { return tq::js::to_js(env, s); });
  }

  Napi::Value MemoryStats(const Napi::CallbackInfo& info) {
    return schedule<tq::MemoryStats>(
        info.Env(), [this] { return loaded().memory_stats(); },
        [](Napi::Env env, tq::MemoryStats& s) { return tq::js::to_js(env, s); });
  }

  // How long the engine thread spins for the next call after one (engine_thread.h); at once, not queued.
  Napi::Value SetBusyPoll(const Napi::CallbackInfo& info) {
    const auto env = info.Env();
    const double ms = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(ms >= 0 && ms <= kMaxBusyPollMs))
      throw_bad_argument(env, "setBusyPoll(ms) needs a number of milliseconds from 0 to " + std::to_string(kMaxBusyPollMs));
    thread_->set_spin(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
    return env.Undefined();
  }
  static constexpr int kMaxBusyPollMs = 60'000;

  Napi::Value ThreadSleeps(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(thread_->sleeps())); }

  Napi::Value RemeasureLevel(const Napi::CallbackInfo& info) {
    return schedule<tq::EngineInfo>(
        info.Env(),
        [this] {
          loaded().remeasure_level();
          return loaded().info();
        },
        [](Napi::Env env, tq::EngineInfo& i) { return tq::js::to_js(env, i); });
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    auto promise = schedule<bool>(
        info.Env(),
        [this] {
          engine_.reset();
          return true;
        },
        [this](Napi::Env env, bool&) -> Napi::Value {
          // The engine thread has nothing left to run: end it now rather than when the wrapper is
          // garbage collected, so that its OpenMP team and their buffers go with it.
          thread_->stop();
          return env.Undefined();
        });
    closed_ = true;
    return promise;
  }

  std::unique_ptr<tq::EngineThread> thread_;
  std::unique_ptr<tq::Engine> engine_;  // touched on the engine thread only
  bool closed_ = false;                  // touched on the JS thread only
};

Napi::Object InitAll(Napi::Env env, Napi::Object exports) { return NativeEngine::Init(env, exports); }

}  // namespace

NODE_API_MODULE(tqserve_engine, InitAll)
