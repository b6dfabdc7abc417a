#include "model/scripted_model.h"

#include <torch/script.h>

#include <chrono>

#include "batch/visibility.h"
#include "common/errors.h"

namespace tq {

ScriptedModel::ScriptedModel(const std::string& path, at::ScalarType dtype) {
  try {
    module_ = std::make_unique<torch::jit::Module>(torch::jit::load(path));
  } catch (const c10::Error& e) {
    throw EngineError(code::kCheckpointInvalid, path + ": not a loadable TorchScript module: " + e.what_without_backtrace());
  }
  module_->eval();
  module_->to(dtype);
  if (!module_->find_method("lm_head_weight"))
    throw EngineError(code::kCheckpointInvalid, path + ": TorchScript module has no lm_head_weight() method (see docs/engine.md, \"TorchScript models\")");
  lm_head_ = module_->run_method("lm_head_weight").toTensor().contiguous();
  if (lm_head_.dim() != 2) throw EngineError(code::kTensorShape, path + ": lm_head_weight() must return [vocab, hidden]");
}

ScriptedModel::~ScriptedModel() = default;

ForwardResult ScriptedModel::final_hidden(const PackedTokens& packed) {
  ForwardInfo times;
  auto t0 = std::chrono::steady_clock::now();
  auto opts = at::TensorOptions().dtype(at::kLong);
  auto ids = at::tensor(at::ArrayRef<int64_t>(packed.ids), opts);
  auto pos = at::tensor(at::ArrayRef<int64_t>(packed.positions()), opts);
  auto seg = at::tensor(at::ArrayRef<int64_t>(packed.segments()), opts);
  auto parent = at::tensor(at::ArrayRef<int64_t>(packed.parents()), opts);
  auto root = at::tensor(at::ArrayRef<int64_t>(packed.roots()), opts);
  auto mask = visibility_mask(pos, seg, parent, root, pos, seg, std::nullopt);
  auto hidden = module_->forward({ids, pos, mask}).toTensor();
  if (hidden.dim() != 2 || hidden.size(0) != ids.size(0) || hidden.size(1) != hidden_size())
    throw EngineError(code::kTensorShape, "TorchScript forward must return [tokens, hidden]");
  auto rows = at::tensor(at::ArrayRef<int64_t>(packed.output_rows), opts);
  times.computed_tokens = static_cast<int64_t>(packed.ids.size());
  times.state_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (size_t s = 0; s < packed.segment_lengths.size(); ++s)
    if (packed.is_root(s)) {
      times.cached_tokens.push_back(0);
      times.boundary_tickets.push_back(-1);
    }
  return {hidden.index_select(0, rows).to(at::kFloat), times};
}

}  // namespace tq
