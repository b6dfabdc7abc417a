#include "batch/visibility.h"

namespace tq {

at::Tensor visibility_mask(const at::Tensor& q_pos, const at::Tensor& q_seg, const at::Tensor& q_parent, const at::Tensor& q_root,
                           const at::Tensor& k_pos, const at::Tensor& k_seg, std::optional<int64_t> window) {
  auto qp = q_pos.unsqueeze(1), kp = k_pos.unsqueeze(0), ks = k_seg.unsqueeze(0);
  auto lineage = ks.eq(q_seg.unsqueeze(1)).logical_or_(ks.eq(q_parent.unsqueeze(1))).logical_or_(ks.eq(q_root.unsqueeze(1)));
  auto mask = kp.le(qp).logical_and_(lineage);
  if (window) mask.logical_and_((qp - kp).lt(*window));
  return mask;
}

}  // namespace tq
