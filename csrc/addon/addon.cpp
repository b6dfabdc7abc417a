// The Node-API surface (declared in src/engine/native.ts). Each method turns
// its JS arguments into C++ values on the JS thread (js_values.h), runs the
// work on the engine thread, and settles a Promise through a thread-safe
// function. Every C++/torch error becomes a JS Error with a stable `code` and
// `details`.
#include <napi.h>

#include <memory>
#include <mutex>
#include <optional>

#include "addon/engine_thread.h"
#include "addon/js_values.h"
#include "engine/engine.h"
#include "engine/launched_batch.h"
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
                            InstanceMethod("cachesAfterLastCall", &NativeEngine::CachesAfterLastCall),
                            InstanceMethod("memoryStats", &NativeEngine::MemoryStats),
                            InstanceMethod("remeasureLevel", &NativeEngine::RemeasureLevel),
                            InstanceMethod("setBusyPoll", &NativeEngine::SetBusyPoll),
                            InstanceMethod("threadSleeps", &NativeEngine::ThreadSleeps),
                            InstanceMethod("callsOverlapped", &NativeEngine::CallsOverlapped)});
    exports.Set("NativeEngine", cls);
    return exports;
  }

  explicit NativeEngine(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeEngine>(info), thread_(std::make_unique<tq::EngineThread>()) {}
  ~NativeEngine() override { thread_->stop(); }

 private:
  template <typename R>
  struct Outcome {
    std::optional<R> value;
    Failure failure;
  };

  // Runs `work` (on the engine thread), keeping its value or its error as JS will see it.
  template <typename R>
  static std::unique_ptr<Outcome<R>> outcome_of(const std::function<R()>& work) {
    auto outcome = std::make_unique<Outcome<R>>();
    try {
      outcome->value = work();
    } catch (const EngineError& e) {
      outcome->failure = {e.code(), e.what(), e.details()};
    } catch (const c10::Error& e) {
      outcome->failure = {tq::code::kTorch, e.what_without_backtrace(), {}};
    } catch (const std::exception& e) {
      outcome->failure = {tq::code::kInternal, e.what(), {}};
    }
    return outcome;
  }

  // A promise for the engine thread to settle, once, with an outcome; `to_js` converts its value on the JS thread.
  // Null (the promise rejected already) once the engine is closed.
  template <typename R>
  std::function<void(std::unique_ptr<Outcome<R>>)> promise_settler(Napi::Env env, Napi::Promise::Deferred deferred,
                                                                   std::function<Napi::Value(Napi::Env, R&)> to_js) {
    if (closed_) {
      deferred.Reject(to_js_error(env, Failure{tq::code::kClosed, "the engine is closed", {}}).Value());
      return nullptr;
    }
    auto tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "tqserve-engine", 0, 1);
    Ref();  // keep this wrapper alive while the job is pending
    return [this, to_js, deferred, tsfn](std::unique_ptr<Outcome<R>> outcome) mutable {
      tsfn.BlockingCall(outcome.release(), [this, to_js, deferred](Napi::Env env, Napi::Function, Outcome<R>* o) {
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
    };
  }

  // Runs `work` on the engine thread, once the calls before it are finished (or beside one still unfinished, for
  // work on the engine's host state alone: engine_thread.h); `to_js` converts its result on the JS thread.
  enum class Order { AfterCalls, BesideCalls };
  template <typename R>
  Napi::Value schedule(Napi::Env env, std::function<R()> work, std::function<Napi::Value(Napi::Env, R&)> to_js, Order order = Order::AfterCalls) {
    auto deferred = Napi::Promise::Deferred::New(env);
    if (auto settle = promise_settler<R>(env, deferred, to_js)) {
      auto job = [settle, work]() mutable { settle(outcome_of(work)); };
      order == Order::BesideCalls ? thread_->post_beside_calls(job) : thread_->post(job);
    }
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
    using Results = std::vector<tq::AnswerResult>;
    auto deferred = Napi::Promise::Deferred::New(env);
    auto settle = promise_settler<Results>(env, deferred, [](Napi::Env env, Results& results) -> Napi::Value {
      auto out = Napi::Array::New(env, results.size());
      for (size_t i = 0; i < results.size(); ++i) out.Set(static_cast<uint32_t>(i), tq::js::to_js(env, results[i]));
      return out;
    });
    if (!settle) return deferred.Promise();
    // In two halves (engine_thread.h): the next call may be launched before this one is finished.
    thread_->post_launch([this, settle, reqs = std::move(reqs)](bool overlapping) mutable -> tq::LaunchedCall {
      auto launch = outcome_of<std::shared_ptr<tq::LaunchedBatch>>([&] { return std::shared_ptr<tq::LaunchedBatch>(loaded().launch_batch(std::move(reqs))); });
      // A launch that failed settles its call in its turn too: calls settle in the order they came.
      if (!launch->value) {
        auto failed = std::make_shared<Failure>(launch->failure);
        return {[] { return true; }, [settle, failed]() mutable { settle(std::make_unique<Outcome<Results>>(Outcome<Results>{std::nullopt, *failed})); }};
      }
      auto launched = *launch->value;
      // A device error is the call's, reported as its finish waits for the device.
      const auto device_done = [launched] {
        try {
          return launched->device_done();
        } catch (...) {
          return true;
        }
      };
      return {device_done,
              [this, settle, launched, overlapping]() mutable {
                settle(outcome_of<Results>([&] {
                  auto results = loaded().finish_batch(*launched);
                  for (auto& r : results) r.overlapped = overlapping;
                  keep_caches_after_call();
                  return results;
                }));
              }};
    });
    return deferred.Promise();
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
        [](Napi::Env env, bool& ok) -> Napi::Value { return Napi::Boolean::New(env, ok); }, Order::BesideCalls);
  }

  Napi::Value CacheStats(const Napi::CallbackInfo& info) {
    return schedule<tq::CacheStats>(
        info.Env(), [this] { return loaded().cache_stats(); },
        [](Napi::Env env, tq::CacheStats& s) { return tq::js::to_js(env, s); }, Order::BesideCalls);
  }

  Napi::Value VisionCacheStats(const Napi::CallbackInfo& info) {
    return schedule<tq::VisionCacheStats>(
        info.Env(), [this] { return loaded().vision_cache_stats(); },
        [](Napi::Env env, tq::VisionCacheStats& s) { return tq::js::to_js(env, s); }, Order::BesideCalls);
  }

  // The caches' counters as the last call left them, taken by the engine thread as it finished the call and read here on
  // the JS thread at once: /metrics reads them without a job for the engine thread, which would run behind a call in
  // flight, or ahead of the next one (a client's next request waited for it). Undefined before the first call.
  Napi::Value CachesAfterLastCall(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    std::optional<CachesAfterCall> caches;
    {
      std::lock_guard<std::mutex> lock(caches_mutex_);
      caches = caches_after_call_;
    }
    if (!caches) return env.Undefined();
    auto out = Napi::Object::New(env);
    out.Set("stats", tq::js::to_js(env, caches->cache));
    out.Set("vision", tq::js::to_js(env, caches->vision));
    return out;
  }

  // On the engine thread.
  void keep_caches_after_call() {
    const CachesAfterCall caches{loaded().cache_stats(), loaded().vision_cache_stats()};
    std::lock_guard<std::mutex> lock(caches_mutex_);
    caches_after_call_ = caches;
  }

  Napi::Value MemoryStats(const Napi::CallbackInfo& info) {
    return schedule<tq::MemoryStats>(
        info.Env(), [this] { return loaded().memory_stats(); },
        [](Napi::Env env, tq::MemoryStats& s) { return tq::js::to_js(env, s); }, Order::BesideCalls);
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
  Napi::Value CallsOverlapped(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(thread_->overlapped())); }

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
  struct CachesAfterCall {
    tq::CacheStats cache;
    tq::VisionCacheStats vision;
  };
  std::mutex caches_mutex_;  // written on the engine thread, read on the JS thread
  std::optional<CachesAfterCall> caches_after_call_;
};

Napi::Object InitAll(Napi::Env env, Napi::Object exports) { return NativeEngine::Init(env, exports); }

}  // namespace

NODE_API_MODULE(tqserve_engine, InitAll)
