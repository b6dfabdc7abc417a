// The HTTP server's torch-free addon (tqserve_host.node), also loaded by the engine processes for their
// channel to the server: each file adds its functions to the module's exports.
#pragma once
#include <napi.h>

namespace tq_host {
void add_release_memory(Napi::Env env, Napi::Object exports);
void add_shared_memory(Napi::Env env, Napi::Object exports);
}  // namespace tq_host
