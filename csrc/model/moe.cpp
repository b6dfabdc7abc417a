#include "model/moe.h"

#include <algorithm>
#include <numeric>

#include "common/fixed_math.h"

namespace tq {
namespace {

// x rounded to the compute dtype, as a float.
float rounded(double x, at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? static_cast<float>(c10::BFloat16(static_cast<float>(x))) : static_cast<float>(x);
}

// One token's softmax over all experts in float64 (fixed_math's exp: the same bits on every CPU), then its top k,
// ties to the lower index: a stable sort by descending probability.
std::vector<std::pair<int64_t, double>> top_experts(const float* logits, int64_t experts, int64_t top_k, bool renormalize) {
  const double max = *std::max_element(logits, logits + experts);
  std::vector<double> p(experts);
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e) sum += p[e] = fixed_math::exp(static_cast<double>(logits[e]) - max);
  std::vector<int64_t> order(experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  std::vector<std::pair<int64_t, double>> top;
  double kept = 0;
  for (int64_t k = 0; k < top_k; ++k) {
    top.emplace_back(order[k], p[order[k]] / sum);
    kept += top.back().second;
  }
  if (renormalize)
    for (auto& [e, w] : top) w /= kept;
  return top;
}

}  // namespace

ExpertRoutes route_tokens(const at::Tensor& logits, int64_t top_k, bool renormalize, at::ScalarType dtype) {
  const auto l = logits.contiguous();
  const int64_t tokens = l.size(0), experts = l.size(1);
  ExpertRoutes routes{std::vector<std::vector<int64_t>>(experts), std::vector<std::vector<float>>(experts)};
  const float* data = l.data_ptr<float>();
  for (int64_t t = 0; t < tokens; ++t)
    for (const auto& [e, w] : top_experts(data + t * experts, experts, top_k, renormalize)) {
      routes.rows[e].push_back(t);
      routes.weights[e].push_back(rounded(w, dtype));
    }
  return routes;
}

MoeBlock::MoeBlock(const MoeConfig& config, const LayerKernels& kernels, at::ScalarType dtype, GateActivation act, std::unique_ptr<Linear> router,
                   std::vector<GatedMlp> experts, std::unique_ptr<GatedMlp> shared, std::unique_ptr<Linear> shared_gate)
    : config_(config),
      kernels_(kernels),
      dtype_(dtype),
      act_(act),
      router_(std::move(router)),
      experts_(std::move(experts)),
      shared_(std::move(shared)),
      shared_gate_(std::move(shared_gate)) {}

at::Tensor MoeBlock::expert_output(const GatedMlp& mlp, const at::Tensor& x) const {
  auto gate = (*mlp.gate)(x, dtype_);
  return (*mlp.down)(kernels_.gated_mul(gate, (*mlp.up)(x, dtype_), act_), at::kFloat);
}

// Qwen2-MoE: sigmoid(shared_expert_gate(h)) x shared_expert(h), the gate's logit rounded to the compute dtype and
// its sigmoid taken in float64 (fixed_math's exp) and rounded to it, as transformers computes it in that dtype.
at::Tensor MoeBlock::shared_output(const at::Tensor& h) const {
  const auto logit = (*shared_gate_)(h, dtype_).to(at::kCPU, at::kFloat).contiguous();
  auto scale = at::empty({h.size(0), 1}, at::kFloat);
  const float* in = logit.data_ptr<float>();
  float* out = scale.data_ptr<float>();
  for (int64_t t = 0; t < h.size(0); ++t) out[t] = rounded(1.0 / (1.0 + fixed_math::exp(-static_cast<double>(in[t]))), dtype_);
  return expert_output(*shared_, h).mul_(scale.to(h.device()));
}

at::Tensor MoeBlock::operator()(const at::Tensor& h) const {
  const auto logits = (*router_)(h, dtype_).to(at::kCPU, at::kFloat);
  const auto routes = route_tokens(logits, config_.top_k, config_.renormalize, dtype_);
  auto out = at::zeros({h.size(0), h.size(1)}, h.options().dtype(at::kFloat));
  const auto on_device = [&](const at::Tensor& t) { return t.to(h.device()); };
  // Experts in index order: each token's k terms are added in that order, one add each (its rows are distinct).
  for (size_t e = 0; e < experts_.size(); ++e) {
    if (routes.rows[e].empty()) continue;
    const auto rows = on_device(at::tensor(routes.rows[e], at::kLong));
    const auto weights = on_device(at::tensor(routes.weights[e], at::kFloat).unsqueeze(1));
    out.index_add_(0, rows, expert_output(experts_[e], h.index_select(0, rows)).mul_(weights));
  }
  if (shared_) out.add_(shared_output(h));
  return out;
}

int64_t MoeBlock::bytes() const {
  int64_t total = router_->bytes() + (shared_ ? shared_->bytes() + shared_gate_->bytes() : 0);
  for (const auto& e : experts_) total += e.bytes();
  return total;
}

ParameterCounts parameter_counts(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t embeddings = c.vocab_size * h * (c.tie_word_embeddings ? 1 : 2);
  ParameterCounts n{embeddings, embeddings};
  for (const auto& layer : c.layers) {
    const int64_t attention = h * (q + 2 * kv) + q * h;
    n.total += attention;
    n.active += attention;
    if (!layer.sparse || !c.moe) {
      n.total += 3 * h * c.intermediate_size;
      n.active += 3 * h * c.intermediate_size;
      continue;
    }
    const auto& m = *c.moe;
    const int64_t expert = 3 * h * m.expert_intermediate, always = h * m.num_experts + (m.shared_intermediate ? 3 * h * m.shared_intermediate + h : 0);
    n.total += always + m.num_experts * expert;
    n.active += always + m.top_k * expert;
  }
  return n;
}

}  // namespace tq
