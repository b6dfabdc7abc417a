#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/errors.h"

namespace tq {
namespace {

at::ScalarType parse_dtype(const std::string& dtype, const std::string& where) {
  if (dtype == "F32") return at::kFloat;
  if (dtype == "BF16") return at::kBFloat16;
  if (dtype == "F16") return at::kHalf;
  if (dtype == "F64") return at::kDouble;
  if (dtype == "I64") return at::kLong;
  if (dtype == "I32") return at::kInt;
  throw EngineError(code::kCheckpointInvalid, where + ": unsupported dtype " + dtype);
}

[[noreturn]] void fail(const std::string& code, const std::string& path, const std::string& what) {
  throw EngineError(code, path + ": " + what);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(code::kCheckpointInvalid, path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(code::kCheckpointInvalid, path, "cannot stat");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(code::kTruncated, path, "file is " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
  }
  // MAP_PRIVATE + PROT_WRITE: torch tensors may be non-const views; pages are
  // only copied if someone writes, which the engine never does.
  map_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(code::kCheckpointInvalid, path, "mmap failed");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, map_, 8);
  if (header_len > size_ - 8) {
    fail(code::kTruncated, path, "header length " + std::to_string(header_len) + " exceeds file size " + std::to_string(size_));
  }
  data_offset_ = 8 + header_len;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(static_cast<const char*>(map_) + 8, static_cast<const char*>(map_) + data_offset_);
  } catch (const std::exception& e) {
    fail(code::kCheckpointInvalid, path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(code::kCheckpointInvalid, path, "header is not a JSON object");
  const size_t data_size = size_ - data_offset_;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      TensorEntry e;
      e.dtype = parse_dtype(info.at("dtype").get<std::string>(), path + " tensor " + name);
      e.shape = info.at("shape").get<std::vector<int64_t>>();
      auto offsets = info.at("data_offsets").get<std::vector<size_t>>();
      if (offsets.size() != 2 || offsets[1] < offsets[0]) fail(code::kCheckpointInvalid, path, "tensor " + name + " has bad data_offsets");
      e.begin = offsets[0];
      e.end = offsets[1];
      int64_t numel = 1;
      for (auto d : e.shape) numel *= d;
      if (static_cast<size_t>(numel) * at::elementSize(e.dtype) != e.end - e.begin) {
        fail(code::kCheckpointInvalid, path, "tensor " + name + " byte size does not match its shape and dtype");
      }
      if (e.end > data_size) {
        fail(code::kTruncated, path, "tensor " + name + " ends at byte " + std::to_string(data_offset_ + e.end) +
                                         " but the file has " + std::to_string(size_) + " bytes (truncated file?)");
      }
      entries_.emplace(name, std::move(e));
    } catch (const nlohmann::json::exception& ex) {
      fail(code::kCheckpointInvalid, path, "tensor " + name + " has a malformed header entry: " + ex.what());
    }
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

at::Tensor SafetensorsFile::view(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail(code::kMissingTensor, path_, "no tensor named " + name);
  const TensorEntry& e = it->second;
  char* base = static_cast<char*>(map_) + data_offset_ + e.begin;
  return at::from_blob(base, e.shape, at::TensorOptions().dtype(e.dtype));
}

void SafetensorsFile::release(const void* data, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  const auto map_begin = reinterpret_cast<uintptr_t>(map_), map_end = map_begin + size_;
  if (!map_ || begin < map_begin || end > map_end) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace tq
