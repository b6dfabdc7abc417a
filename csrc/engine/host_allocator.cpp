#include "engine/host_allocator.h"

#include <chrono>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tq {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void release_free_host_memory() {
#if defined(__GLIBC__)
  static auto last = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(1)) return;
  last = now;
#if __GLIBC_PREREQ(2, 33)
  if (mallinfo2().fordblks <= kKeptFreeHostBytes) return;
#endif
  malloc_trim(0);
#endif
}

}  // namespace tq
