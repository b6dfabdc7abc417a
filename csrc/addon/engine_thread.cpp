#include "addon/engine_thread.h"

#include <c10/core/InferenceMode.h>

#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tq {
namespace {

void pause() {
#if defined(__x86_64__)
  _mm_pause();  // the sibling hyperthread keeps its share while this one waits
#endif
}

}  // namespace

EngineThread::EngineThread() : thread_([this] { run(); }) {}

EngineThread::~EngineThread() { stop(); }

void EngineThread::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    queued_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_one();
}

void EngineThread::post(std::function<void()> job) { enqueue({std::move(job), nullptr, false}); }

void EngineThread::post_beside_calls(std::function<void()> job) { enqueue({std::move(job), nullptr, true}); }

void EngineThread::post_launch(std::function<LaunchedCall(bool)> launch) { enqueue({nullptr, std::move(launch), false}); }

void EngineThread::set_spin(std::chrono::microseconds window) { spin_us_.store(window.count(), std::memory_order_relaxed); }

void EngineThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stop_asked_.store(true, std::memory_order_release);
  }
  wake_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EngineThread::spin_for_next() {
  const auto window = std::chrono::microseconds(spin_us_.load(std::memory_order_relaxed));
  if (window.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + window;
  while (queued_.load(std::memory_order_acquire) == 0 && !stop_asked_.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < until)
    pause();
}

void EngineThread::spin_while_device_runs(const LaunchedCall& call) {
  while (queued_.load(std::memory_order_acquire) == 0 && !stop_asked_.load(std::memory_order_acquire) && !call.device_done()) pause();
}

bool EngineThread::take(Job& job, bool wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (wait) {
    if (!stopping_ && jobs_.empty()) sleeps_.fetch_add(1, std::memory_order_relaxed);
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
  }
  if (jobs_.empty()) return false;
  job = std::move(jobs_.front());
  jobs_.pop_front();
  queued_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void EngineThread::run() {
  c10::InferenceMode inference;  // no autograd bookkeeping for anything the engine computes
  // The last call launched, not yet finished; none (default-made) at first and once finished. Not a std::optional: GCC
  // 12 takes the std::functions inside one as maybe uninitialized where it is assigned or emplaced (-Wextra).
  LaunchedCall unfinished;
  const auto finish_unfinished = [&] {
    if (unfinished.pending()) std::exchange(unfinished, {}).finish();
  };
  for (;;) {
    if (unfinished.pending()) spin_while_device_runs(unfinished);
    else spin_for_next();
    Job job;
    if (!take(job, /*wait=*/!unfinished.pending())) {
      if (!unfinished.pending()) return;  // stopping, with nothing left
      finish_unfinished();      // the device is done with it, and nothing came to launch behind it
      continue;
    }
    if (!job.launch) {
      if (!job.beside_calls) finish_unfinished();
      job.run();
      continue;
    }
    const bool overlapping = unfinished.pending();
    auto launched = job.launch(overlapping);
    if (overlapping) overlapped_.fetch_add(1, std::memory_order_relaxed);
    finish_unfinished();
    unfinished = std::move(launched);
  }
}

}  // namespace tq
