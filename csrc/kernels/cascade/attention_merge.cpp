#include "kernels/cascade/attention_merge.h"

#include <ATen/Parallel.h>

#include <stdexcept>
#include <string>

#include "kernels/math/attention_merge_math.h"
#if TQ_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/attention_merge.h"
#include "kernels/cuda/launch_check.h"
#endif

namespace tq {
namespace {

at::Tensor merge_on_cpu(const DeviceMerge& m, const at::Tensor& partial, const at::Tensor& lse, at::ScalarType out_dtype) {
  const int64_t rows = static_cast<int64_t>(m.begin.size()) - 1, heads = partial.size(1), dim = partial.size(2), stacked = partial.size(0);
  auto out = at::empty({rows, heads, dim}, at::kFloat);
  const float* p = partial.data_ptr<float>();
  const float* l = lse.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, rows * heads, 16, [&](int64_t begin, int64_t end) {
    float lses[merge::kMaxEntries], weight[merge::kMaxEntries];
    const float* value[merge::kMaxEntries];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / heads, head = item % heads;
      const int first = m.begin[row], n = m.begin[row + 1] - first;
      for (int e = 0; e < n; ++e) lses[e] = l[head * stacked + m.entry[first + e]];
      const float total = merge::weights(lses, n, weight);
      for (int64_t d = 0; d < dim; ++d) {
        for (int e = 0; e < n; ++e) value[e] = p + (m.entry[first + e] * heads + head) * dim + d;
        o[item * dim + d] = merge::merged(weight, value, n, total);
      }
    }
  });
  return out.to(out_dtype);
}

#if TQ_CUDA
at::Tensor merge_on_cuda(const DeviceMerge& m, const at::Tensor& partial, const at::Tensor& lse, at::ScalarType out_dtype) {
  const int64_t rows = static_cast<int64_t>(m.begin.size()) - 1;
  auto out = at::empty({rows, partial.size(1), partial.size(2)}, partial.options().dtype(out_dtype));
  cuda::AttentionMergeArgs args{static_cast<int>(rows), static_cast<int>(partial.size(1)), static_cast<int>(partial.size(2)),
                                m.begin_on_device.data_ptr<int32_t>(), m.entry_on_device.data_ptr<int32_t>(), partial.data_ptr(),
                                lse.data_ptr<float>(), static_cast<int>(partial.size(0)), partial.scalar_type() == at::kBFloat16,
                                out_dtype == at::kBFloat16, out.data_ptr()};
  const auto stream = c10::cuda::getCurrentCUDAStream(partial.device().index()).stream();
  cuda::check_launch("attention merge kernel", [&] { return cuda::launch_attention_merge(args, stream); });
  return out;
}
#endif

}  // namespace

DeviceMerge prepare_merge(const CascadePlan& plan, at::Device device) {
  DeviceMerge m;
  m.begin = plan.merge_begin;
  std::vector<int32_t> tier_start{0};
  for (const auto& tier : plan.tiers) tier_start.push_back(tier_start.back() + tier.total_q());
  for (size_t e = 0; e < plan.merge_tier.size(); ++e) m.entry.push_back(tier_start[plan.merge_tier[e]] + plan.merge_row[e]);
  if (plan.merge_capacity > 0) m.entry.resize(static_cast<size_t>(plan.merge_capacity), 0);  // spare entries, never read
  if (plan.max_entries > merge::kMaxEntries)
    throw std::invalid_argument("attention merge: a row in " + std::to_string(plan.max_entries) + " tiers (at most " +
                                std::to_string(merge::kMaxEntries) + ")");
  if (device.is_cuda()) {
    m.begin_on_device = at::tensor(at::ArrayRef<int32_t>(m.begin), at::kInt);
    m.entry_on_device = at::tensor(at::ArrayRef<int32_t>(m.entry), at::kInt);
  }
  return m;
}

at::Tensor merge_attention(const DeviceMerge& merge, const std::vector<PartialResult>& parts, at::ScalarType out_dtype) {
  std::vector<at::Tensor> outs, lses;
  for (const auto& p : parts) {
    outs.push_back(p.out);
    lses.push_back(p.lse);
  }
  const auto partial = at::cat(outs), lse = at::cat(lses, 1).contiguous();
#if TQ_CUDA
  if (partial.is_cuda()) {
    const auto stored = partial.scalar_type() == at::kBFloat16 ? partial.contiguous() : partial.to(at::kFloat).contiguous();
    return merge_on_cuda(merge, stored, lse, out_dtype);
  }
#endif
  return merge_on_cpu(merge, partial.to(at::kFloat).contiguous(), lse.to(at::kFloat), out_dtype);
}

}  // namespace tq
