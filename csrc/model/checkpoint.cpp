#include "model/checkpoint.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/errors.h"

namespace tq {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::vector<std::string> shard_files(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  if (!exists(index)) {
    if (!exists(dir + "/model.safetensors"))
      throw EngineError(code::kCheckpointInvalid, dir + ": neither model.safetensors nor model.safetensors.index.json exists");
    return {dir + "/model.safetensors"};
  }
  std::ifstream in(index);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw EngineError(code::kCheckpointInvalid, index + ": not valid JSON: " + e.what());
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw EngineError(code::kCheckpointInvalid, index + ": missing weight_map");
  std::set<std::string> names;
  for (auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw EngineError(code::kCheckpointInvalid, index + ": weight_map entry " + tensor + " is not a file name");
    names.insert(file.get<std::string>());
  }
  std::vector<std::string> files;
  for (const auto& n : names) {
    if (!exists(dir + "/" + n)) throw EngineError(code::kCheckpointInvalid, index + ": lists shard " + n + " which does not exist");
    files.push_back(dir + "/" + n);
  }
  return files;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir), config_(read_model_config(dir)) {
  for (const auto& path : shard_files(dir)) {
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& [name, entry] : files_.back()->entries()) where_[name] = {files_.back().get(), name};
  }
  // transformers 5 saves a VLM's text model under model.language_model.* and its vision tower
  // under model.visual.*; the engine names them as transformers 4 did.
  const std::pair<std::string, std::string> renames[] = {{"model.language_model.", "model."}, {"model.visual.", "visual."}};
  std::map<std::string, Stored> renamed;
  for (const auto& [name, stored] : where_) {
    std::string key = name;
    for (const auto& [from, to] : renames)
      if (name.rfind(from, 0) == 0) key = to + name.substr(from.size());
    renamed[key] = stored;
  }
  where_ = std::move(renamed);
}

at::Tensor Checkpoint::get(const std::string& name, at::IntArrayRef shape, at::ScalarType dtype) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw EngineError(code::kMissingTensor, dir_ + ": missing tensor " + name);
  at::Tensor t = it->second.file->view(it->second.name);
  if (t.sizes() != shape)
    throw EngineError(code::kTensorShape, it->second.file->path() + ": tensor " + it->second.name + " has shape " + shape_str(t.sizes()) +
                                              ", expected " + shape_str(shape));
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

void Checkpoint::release(const at::Tensor& weight) const {
  for (const auto& file : files_) file->release(weight.data_ptr(), weight.nbytes());
}

std::string Checkpoint::stored_dtype() const {
  if (files_.empty() || files_[0]->entries().empty()) return "unknown";
  return c10::toString(files_[0]->entries().begin()->second.dtype);
}

}  // namespace tq
