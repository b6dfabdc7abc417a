// Shared memory between the server and an engine process (src/server/engine-process/channel.ts): an
// anonymous memfd, mapped by the server and inherited by the engine process as one of its stdio fds.
// Node has no way to map memory two processes share; both sides then read and write it as an
// ArrayBuffer. Anonymous, so nothing is left in /dev/shm when either process dies.
#include "host_addon.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tq_host {
namespace {

Napi::Value map_fd(Napi::Env env, int fd, size_t bytes) {
  void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) throw Napi::Error::New(env, std::string("mmap of the shared memory failed: ") + std::strerror(errno));
  return Napi::ArrayBuffer::New(env, at, bytes, [bytes](Napi::Env, void* data) { munmap(data, bytes); });
}

size_t byte_count(const Napi::CallbackInfo& info, int at) {
  double bytes = info[at].As<Napi::Number>().DoubleValue();
  if (!(bytes > 0 && bytes <= double(1u << 30))) throw Napi::RangeError::New(info.Env(), "shared memory size must be in (0, 1 GiB]");
  return size_t(bytes);
}

// createSharedMemory(bytes) -> { fd, buffer }: a new memfd of that size (zeroed), mapped. The fd is
// close-on-exec: a child gets it only where it is named in the child's stdio (dup2 clears the flag).
Napi::Value create_shared_memory(const Napi::CallbackInfo& info) {
  size_t bytes = byte_count(info, 0);
#if defined(__linux__)
  int fd = memfd_create("tqserve-channel", MFD_CLOEXEC);
#else
  int fd = -1;
  errno = ENOSYS;
#endif
  if (fd < 0) throw Napi::Error::New(info.Env(), std::string("memfd_create failed: ") + std::strerror(errno));
  Napi::Value buffer;
  try {
    if (ftruncate(fd, off_t(bytes)) != 0) throw Napi::Error::New(info.Env(), std::string("sizing the shared memory failed: ") + std::strerror(errno));
    buffer = map_fd(info.Env(), fd, bytes);
  } catch (...) {
    close(fd);  // the caller never sees it
    throw;
  }
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("fd", fd);
  out.Set("buffer", buffer);
  return out;
}

// mapSharedMemory(fd, bytes) -> ArrayBuffer: the memory behind an inherited fd.
Napi::Value map_shared_memory(const Napi::CallbackInfo& info) {
  return map_fd(info.Env(), info[0].As<Napi::Number>().Int32Value(), byte_count(info, 1));
}

}  // namespace

void add_shared_memory(Napi::Env env, Napi::Object exports) {
  exports.Set("createSharedMemory", Napi::Function::New(env, create_shared_memory));
  exports.Set("mapSharedMemory", Napi::Function::New(env, map_shared_memory));
}

}  // namespace tq_host
