// A memory-mapped .safetensors file: the header is parsed once and tensors are
// views of the mapping (no copy). A header that points past the end of the
// file is reported as truncated, naming the file and the tensor.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace tq {

struct TensorEntry {
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets into the data section
  size_t end = 0;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }
  bool has(const std::string& name) const { return entries_.count(name) > 0; }
  // A tensor viewing the mapped bytes; it stays valid while this file lives.
  at::Tensor view(const std::string& name) const;
  // Drops the resident pages wholly inside [data, data + bytes) if they are
  // part of this mapping (a later read faults them in again from the file).
  void release(const void* data, size_t bytes) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  size_t data_offset_ = 0;
  std::map<std::string, TensorEntry> entries_;
};

}  // namespace tq
