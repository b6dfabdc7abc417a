#include "kernels/cascade/step_upload.h"

namespace tq {

std::vector<at::Tensor*> step_arrays(std::vector<DeviceTier>& tiers, DeviceMerge& merge) {
  std::vector<at::Tensor*> out;
  for (auto& l : tiers)
    for (at::Tensor* t : {&l.q_rows, &l.k_rows, &l.cu_q, &l.cu_k, &l.row_seq, &l.row_in_seq, &l.q_pad, &l.k_pad, &l.mask, &l.k_start, &l.k_used})
      if (t->defined()) out.push_back(t);
  for (at::Tensor* t : {&merge.begin_on_device, &merge.entry_on_device, &merge.written_on_device})
    if (t->defined()) out.push_back(t);
  return out;
}

}  // namespace tq
