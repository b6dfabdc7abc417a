// Engine errors carry a stable code (the JS `error.code`) and optional integer
// details (for example the two lengths of a context overflow), so that the
// server can map them to HTTP statuses without parsing messages.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace tq {

namespace code {
inline constexpr const char* kCheckpointInvalid = "CHECKPOINT_INVALID";
inline constexpr const char* kMissingTensor = "CHECKPOINT_MISSING_TENSOR";
inline constexpr const char* kTensorShape = "CHECKPOINT_TENSOR_SHAPE";
inline constexpr const char* kTruncated = "CHECKPOINT_TRUNCATED";
inline constexpr const char* kUnknownArchitecture = "UNKNOWN_ARCHITECTURE";
inline constexpr const char* kContextOverflow = "CONTEXT_OVERFLOW";
inline constexpr const char* kBadRequest = "BAD_REQUEST";
inline constexpr const char* kCacheCapacity = "KV_CACHE_CAPACITY";
inline constexpr const char* kNotLoaded = "ENGINE_NOT_LOADED";
inline constexpr const char* kClosed = "ENGINE_CLOSED";
inline constexpr const char* kTorch = "TORCH_ERROR";
inline constexpr const char* kInternal = "INTERNAL";
}  // namespace code

class EngineError : public std::runtime_error {
 public:
  EngineError(std::string code, const std::string& message,
              std::map<std::string, int64_t> details = {})
      : std::runtime_error(message), code_(std::move(code)), details_(std::move(details)) {}
  const std::string& code() const { return code_; }
  const std::map<std::string, int64_t>& details() const { return details_; }

 private:
  std::string code_;
  std::map<std::string, int64_t> details_;
};

}  // namespace tq
