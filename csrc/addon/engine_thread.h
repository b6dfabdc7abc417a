// One dedicated thread that runs every engine job in arrival order. A single
// thread (not the libuv pool) keeps torch's intra-op threads from being
// oversubscribed and leaves the pool free for fs and dns.
//
// A call comes in two halves (post_launch): its launch queues its work on the
// device, and its finish waits for that work and settles the call. Where the
// next call is queued by the time one is launched, or arrives while the device
// still runs it, the thread launches that next call before it finishes the one
// before: on CUDA the host's work for one call (packing, planning, uploading,
// launching) then overlaps the device's work for the other, and the device is
// not left idle between them. The work is the same, in the same order on the
// device's stream: so are the bits. On the CPU a launch computes, and only a
// call queued by the end of the one before overlaps it (the server's
// --calls-in-flight, 1 there by default, sends none).
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

// A call whose work is queued on the device: device_done polls whether the device has done it (never waits);
// finish waits for it and settles the call (a call whose launch failed settles then too: calls settle in order).
struct LaunchedCall {
  std::function<bool()> device_done;
  std::function<void()> finish;
  bool pending() const { return static_cast<bool>(finish); }  // false for a default-made call: none
};

class EngineThread {
 public:
  EngineThread();
  ~EngineThread();
  // A job that runs once every call before it is finished (loading, closing, a forward of its own, the level's measurement).
  void post(std::function<void()> job);
  // A job of the engine's host state alone (stats, a boundary's registration): it runs beside a call still unfinished.
  void post_beside_calls(std::function<void()> job);
  // A call in two halves; `launch` is told whether an earlier call was still unfinished as it began.
  void post_launch(std::function<LaunchedCall(bool overlapping)> launch);
  // How long after a job the thread looks for the next before it sleeps (0: it sleeps at once).
  void set_spin(std::chrono::microseconds window);
  // Runs the queued jobs, then joins. Idempotent.
  void stop();
  // How many times the thread has gone to sleep with nothing queued: each such time, the next job waited for a wake-up.
  int64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  // How many calls were launched while the call before them was still unfinished.
  int64_t overlapped() const { return overlapped_.load(std::memory_order_relaxed); }

 private:
  struct Job {
    std::function<void()> run;
    std::function<LaunchedCall(bool)> launch;  // set instead of run for a call in two halves
    bool beside_calls = false;
  };
  void enqueue(Job job);
  void run();
  // The next job, waiting for one if `wait` (false where none is queued, or the thread is stopping).
  bool take(Job& job, bool wait);
  // Spins until a job is queued, stop is asked, or the window has passed.
  void spin_for_next();
  // Spins until a job is queued, stop is asked, or the device has done `call`.
  void spin_while_device_runs(const LaunchedCall& call);
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::atomic<int64_t> queued_{0};     // jobs_.size(), read without the lock while spinning
  std::atomic<bool> stop_asked_{false};  // stopping_, likewise
  std::atomic<int64_t> spin_us_{0};
  std::atomic<int64_t> sleeps_{0};
  std::atomic<int64_t> overlapped_{0};
  std::thread thread_;
};

}  // namespace tq
