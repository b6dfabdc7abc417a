// The C heap of the server's process. Give its free pages back to the system: after a burst of large
// requests and a full collection (src/server/ops/reclaim.ts), glibc keeps the freed body chunks in its
// arenas: free() returns memory only from the top of an arena, and the live allocations between the chunks
// pin the rest. Only malloc_trim releases the free pages in the middle. And fix the size from which a block
// is mapped on its own (src/tokenizer/tokenizer.ts says why).
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

// mallopt(M_MMAP_THRESHOLD, bytes): true when set; false where the C library is not glibc or refuses it.
Napi::Value set_mmap_threshold(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), mallopt(M_MMAP_THRESHOLD, info[0].As<Napi::Number>().Int32Value()) == 1);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

}  // namespace

void add_release_memory(Napi::Env env, Napi::Object exports) {
  exports.Set("releaseFreeMemory", Napi::Function::New(env, release_free_memory));
  exports.Set("setMmapThreshold", Napi::Function::New(env, set_mmap_threshold));
}

}  // namespace tq_host
