#include "readout.h"

namespace tq {

at::Tensor label_logits_cpu(const at::Tensor& hidden, const at::Tensor& lm_head, const at::Tensor& label_ids) {
  // Rows are upcast so the dot products accumulate in fp32 whatever the weight dtype.
  return at::mv(lm_head.index_select(0, label_ids).to(at::kFloat), hidden.to(at::kFloat));
}

at::Tensor label_logits(const at::Tensor& hidden, const at::Tensor& lm_head, const at::Tensor& label_ids) {
  return label_logits_cpu(hidden, lm_head, label_ids);
}

at::Tensor full_logits(const at::Tensor& hidden, const at::Tensor& lm_head) {
  if (lm_head.scalar_type() == at::kFloat) return at::matmul(hidden.to(at::kFloat), lm_head.t());
  return at::matmul(hidden.to(lm_head.scalar_type()), lm_head.t()).to(at::kFloat);
}

}  // namespace tq
