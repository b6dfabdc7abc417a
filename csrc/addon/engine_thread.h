// One dedicated thread that runs every engine job in arrival order. A single
// thread (not the libuv pool) keeps torch's intra-op threads from being
// oversubscribed and leaves the pool free for fs and dns.
//
// Between jobs it may spin before it sleeps (set_spin): waking a sleeping
// thread takes a futex and a turn of the scheduler, a fraction of a
// millisecond on the VMs we measured, paid by every call that finds the thread
// asleep. Beside a GPU the host's cores are to spare; where the cores compute,
// the spin would take one from them (the window is the server's --busy-poll-ms,
// 0 on the CPU by default).
#pragma once
#include <atomic>
#include <chrono>
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
  // How long after a job the thread looks for the next before it sleeps (0: it sleeps at once).
  void set_spin(std::chrono::microseconds window);
  // Runs the queued jobs, then joins. Idempotent.
  void stop();
  // How many times the thread has gone to sleep with nothing queued: each such time, the next job waited for a wake-up.
  int64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  void run();
  // Spins until a job is queued, stop is asked, or the window has passed.
  void spin_for_next();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::atomic<int64_t> queued_{0};     // jobs_.size(), read without the lock while spinning
  std::atomic<bool> stop_asked_{false};  // stopping_, likewise
  std::atomic<int64_t> spin_us_{0};
  std::atomic<int64_t> sleeps_{0};
  std::thread thread_;
};

}  // namespace tq
