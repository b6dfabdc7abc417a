#include "addon/engine_thread.h"

#include <c10/core/InferenceMode.h>

namespace tq {

EngineThread::EngineThread() : thread_([this] { run(); }) {}

EngineThread::~EngineThread() { stop(); }

void EngineThread::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void EngineThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EngineThread::run() {
  c10::InferenceMode inference;  // no autograd bookkeeping for anything the engine computes
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace tq
