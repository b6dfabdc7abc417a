// The module's entry: the functions of each file of csrc/host_addon/ (host_addon.h).
#include "host_addon.h"

namespace {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  tq_host::add_release_memory(env, exports);
  tq_host::add_shared_memory(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(tqserve_host, init)
