#include "addon/engine_thread.h"

#include <c10/core/InferenceMode.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tq {

EngineThread::EngineThread() : thread_([this] { run(); }) {}

EngineThread::~EngineThread() { stop(); }

void EngineThread::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    queued_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_one();
}

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
         std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__)
    _mm_pause();  // the sibling hyperthread keeps its share while this one waits
#endif
  }
}

void EngineThread::run() {
  c10::InferenceMode inference;  // no autograd bookkeeping for anything the engine computes
  for (;;) {
    spin_for_next();
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!stopping_ && jobs_.empty()) sleeps_.fetch_add(1, std::memory_order_relaxed);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    job();
  }
}

}  // namespace tq
