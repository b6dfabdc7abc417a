// The engine thread's order of work (csrc/addon/engine_thread.h) against a model of a device: calls whose device
// work is "done" when this check says so. On the CPU a launch computes and its device is done at once, so only the
// model reaches the branch a GPU takes: a call that arrives while the device still runs the one before is launched
// before that one is finished. Prints one JSON line: the order of what ran, and the overlap count.
#include <atomic>
#include <cstdio>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "addon/engine_thread.h"

int main() {
  tq::EngineThread thread;
  std::mutex mutex;
  std::vector<std::string> order;
  const auto note = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(what);
  };
  std::atomic<bool> b_done{false};
  std::promise<void> a_launched, b_launched, e_finished;
  // a: its device never done on its own. Launched, it waits for its device or the next job, whichever comes first.
  thread.post_launch([&](bool overlapping) {
    note(overlapping ? "launch a overlapping" : "launch a");
    a_launched.set_value();
    return tq::LaunchedCall{[] { return false; }, [&] { note("finish a"); }};
  });
  a_launched.get_future().wait();
  // b arrives while a's device runs: launched first, then a finished.
  thread.post_launch([&](bool overlapping) {
    note(overlapping ? "launch b overlapping" : "launch b");
    b_launched.set_value();
    return tq::LaunchedCall{[&] { return b_done.load(); }, [&] { note("finish b"); }};
  });
  b_launched.get_future().wait();
  // While b's device runs: a job on the host state alone runs beside it; one that needs the calls before it finished
  // finishes b first.
  thread.post_beside_calls([&] { note("beside b"); });
  thread.post([&] { note("after b"); });
  // e's device is done at once: finished without waiting for another job.
  thread.post_launch([&](bool overlapping) {
    note(overlapping ? "launch e overlapping" : "launch e");
    return tq::LaunchedCall{[] { return true; }, [&] {
                              note("finish e");
                              e_finished.set_value();
                            }};
  });
  e_finished.get_future().wait();
  thread.stop();
  std::printf("{\"order\":[");
  for (size_t i = 0; i < order.size(); ++i) std::printf("%s\"%s\"", i ? "," : "", order[i].c_str());
  std::printf("],\"overlapped\":%lld}\n", static_cast<long long>(thread.overlapped()));
  return 0;
}
