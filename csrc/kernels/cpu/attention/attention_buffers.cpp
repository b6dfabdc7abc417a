// Each thread's attention buffers (attention_item.h), kept from one call to the next and counted
// for /health (attention_buffer_bytes, attention.h).
#include <ATen/Parallel.h>

#include <atomic>

#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/attention/attention_item.h"

namespace tq {
namespace cpu_attention {

namespace {
// Per thread, buffers up to this size stay for the next step (a 1,000-token
// prefill of bench-llama fits); larger ones, taken by a long state or many
// questions, are returned when the step ends, not after each layer: returned
// and taken again at every layer they cost a page fault per page, a fifth of a
// forward's time (bench/README.md, "CPU attention").
constexpr size_t kKeptBufferBytes = size_t{8} << 20;
std::atomic<int64_t> buffer_bytes{0};

// A thread's buffers, counted in buffer_bytes while the thread lives. Each engine has its own
// engine thread and so its own OpenMP team: when an engine closes, its threads end, and what
// their buffers held leaves the count with them.
struct CountedBuffers {
  ItemBuffers buffers;
  int64_t counted = 0;
  ~CountedBuffers() { buffer_bytes -= counted; }
  // Brings the count up to date, having returned oversized buffers if `trim`.
  void settle(bool trim) {
    if (trim && buffers.bytes() > kKeptBufferBytes) buffers = ItemBuffers{};
    const auto now = static_cast<int64_t>(buffers.bytes());
    buffer_bytes += now - counted;
    counted = now;
  }
};
thread_local CountedBuffers kept;
}  // namespace

ItemBuffers& thread_item_buffers() { return kept.buffers; }

void settle_thread_buffers(bool trim) { kept.settle(trim); }

}  // namespace cpu_attention

int64_t attention_buffer_bytes() { return cpu_attention::buffer_bytes.load(); }

int64_t attention_buffer_kept_bytes() { return static_cast<int64_t>(cpu_attention::kKeptBufferBytes); }

void trim_attention_buffers() {
  at::parallel_for(0, at::get_num_threads(), 1, [](int64_t, int64_t) { cpu_attention::settle_thread_buffers(true); });
}

}  // namespace tq
