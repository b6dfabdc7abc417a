// An HF checkpoint folder: config.json plus model.safetensors, or shards listed
// in model.safetensors.index.json. Tensors are fetched by name with the shape
// the architecture expects, under the names of transformers 4's layout (a VLM
// saved by transformers 5, model.language_model.* and model.visual.*, is read
// as model.* and visual.*); a tensor already in the compute dtype is returned
// as a view of the memory map (weights are never copied twice).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/safetensors.h"

namespace tq {

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);
  const ModelConfig& config() const { return config_; }
  bool has(const std::string& name) const { return where_.count(name) > 0; }
  at::Tensor get(const std::string& name, at::IntArrayRef shape, at::ScalarType dtype) const;
  // Once a weight has been copied elsewhere (packed), its mapped pages need
  // not stay resident: keeps peak memory at one copy of the weights.
  void release(const at::Tensor& weight) const;
  // Stored dtype of the first weight, for reporting.
  std::string stored_dtype() const;

 private:
  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  struct Stored {
    const SafetensorsFile* file;
    std::string name;  // as stored; differs from the key in transformers 5's VLM layout
  };
  std::map<std::string, Stored> where_;
};

}  // namespace tq
