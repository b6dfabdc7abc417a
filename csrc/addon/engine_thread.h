// One dedicated thread that runs every engine job in arrival order. A single
// thread (not the libuv pool) keeps torch's intra-op threads from being
// oversubscribed and leaves the pool free for fs and dns.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tq {

class EngineThread {
 public:
  EngineThread();
  ~EngineThread();
  void post(std::function<void()> job);
  // Runs the queued jobs, then joins. Idempotent.
  void stop();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tq
