// Give the C heap's free pages back to the system. After a burst of large requests and a full
// collection (src/server/ops/reclaim.ts), glibc keeps the freed body chunks in its arenas: free() returns
// memory only from the top of an arena, and the live allocations between the chunks pin the rest. Only
// malloc_trim releases the free pages in the middle.
#include "host_addon.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tq_host {
namespace {

// True when memory was released, false when none could be; null where the C library has no malloc_trim.
Napi::Value release_free_memory(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
  return info.Env().Null();
#endif
}

}  // namespace

void add_release_memory(Napi::Env env, Napi::Object exports) {
  exports.Set("releaseFreeMemory", Napi::Function::New(env, release_free_memory));
}

}  // namespace tq_host
