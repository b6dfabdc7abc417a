#include "kernels/cascade/attention_merge.h"

#include <ATen/Parallel.h>

#include <algorithm>
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

// The tiers' results as the merge reads them (merge::source_of): each tier's where its kernel wrote it, in one dtype
// (bf16 where every tier's is, on CUDA; else fp32); stacked into one where they are more than the kernel's
// arguments hold.
struct Sources {
  std::vector<at::Tensor> partial, lse;
  std::vector<int> start{0};
};

Sources sources_of(const std::vector<PartialResult>& parts, bool keep_bf16) {
  TORCH_CHECK(!parts.empty(), "attention merge: no tiers");
  const bool bf16 = keep_bf16 && std::all_of(parts.begin(), parts.end(), [](const auto& p) { return p.out.scalar_type() == at::kBFloat16; });
  const auto stored = [&](const at::Tensor& t) { return bf16 ? t.contiguous() : t.to(at::kFloat).contiguous(); };
  if (parts.size() > static_cast<size_t>(merge::kMaxSources)) return sources_of({stacked_tiers(parts)}, keep_bf16);
  Sources s;
  for (const auto& p : parts) {
    s.partial.push_back(stored(p.out));
    s.lse.push_back(p.lse.to(at::kFloat).contiguous());
    s.start.push_back(s.start.back() + static_cast<int>(p.out.size(0)));
  }
  return s;
}

// Whether the merge can write into the first source (merge_attention's first_holds_every_row): its rows the output's, in
// the output's dtype, read where its tier's kernel wrote it.
bool in_place_first(const Sources& s, const std::vector<PartialResult>& parts, int64_t rows, at::ScalarType out_dtype) {
  const at::Tensor& first = s.partial[0];
  return s.partial.size() == parts.size() && first.size(0) == rows && first.scalar_type() == out_dtype &&
         first.data_ptr() == parts[0].out.data_ptr();
}

at::Tensor merge_on_cpu(const DeviceMerge& m, const Sources& s, at::ScalarType out_dtype, bool in_place) {
  const int64_t rows = static_cast<int64_t>(m.begin.size()) - 1, heads = s.partial[0].size(1), dim = s.partial[0].size(2);
  const int sources = static_cast<int>(s.partial.size());
  std::vector<const float*> p, l;
  for (int i = 0; i < sources; ++i) {
    p.push_back(s.partial[i].data_ptr<float>());
    l.push_back(s.lse[i].data_ptr<float>());
  }
  auto out = in_place ? s.partial[0] : at::empty({rows, heads, dim}, at::kFloat);
  float* o = out.data_ptr<float>();
  // In place where the rows it writes are listed, those alone (as the kernel visits them).
  const bool listed = in_place && m.lists_written;
  const int64_t visited = listed ? static_cast<int64_t>(m.written.size()) : rows;
  at::parallel_for(0, visited * heads, 16, [&](int64_t begin, int64_t end) {
    float lses[merge::kMaxEntries] = {}, weight[merge::kMaxEntries] = {};
    const float* base[merge::kMaxEntries];
    const float* value[merge::kMaxEntries];
    for (int64_t at_item = begin; at_item < end; ++at_item) {
      const int64_t row = listed ? m.written[at_item / heads] : at_item / heads, head = at_item % heads, item = row * heads + head;
      if (row < 0) continue;
      const int first = m.begin[row], n = m.begin[row + 1] - first;
      if (in_place && n == 1 && m.entry[first] == row) continue;  // its value is the merged one, where it lies
      for (int e = 0; e < n; ++e) {
        const int r = m.entry[first + e], src = merge::source_of(s.start.data(), sources, r), local = r - s.start[src];
        lses[e] = l[src][head * (s.start[src + 1] - s.start[src]) + local];
        base[e] = p[src] + (local * heads + head) * dim;
      }
      const float total = merge::weights(lses, n, weight);
      for (int64_t d = 0; d < dim; ++d) {
        for (int e = 0; e < n; ++e) value[e] = base[e] + d;
        o[item * dim + d] = merge::merged(weight, value, n, total);
      }
    }
  });
  return out.to(out_dtype);
}

#if TQ_CUDA
at::Tensor merge_on_cuda(const DeviceMerge& m, const Sources& s, at::ScalarType out_dtype, bool in_place) {
  const int64_t rows = static_cast<int64_t>(m.begin.size()) - 1;
  const auto& first = s.partial[0];
  auto out = in_place ? first : at::empty({rows, first.size(1), first.size(2)}, first.options().dtype(out_dtype));
  if (in_place && m.lists_written && m.written.empty()) return out;  // no row to write (an empty list has no pointer)
  cuda::AttentionMergeArgs args{};
  args.rows = static_cast<int>(rows);
  args.heads = static_cast<int>(first.size(1));
  args.dim = static_cast<int>(first.size(2));
  args.merge_begin = m.begin_on_device.data_ptr<int32_t>();
  args.merge_entry = m.entry_on_device.data_ptr<int32_t>();
  if (in_place && m.lists_written) {
    args.merge_written = m.written_on_device.data_ptr<int32_t>();
    args.written = static_cast<int>(m.written.size());
  }
  args.sources = static_cast<int>(s.partial.size());
  for (int i = 0; i < args.sources; ++i) {
    args.partial[i] = s.partial[i].data_ptr();
    args.lse[i] = s.lse[i].data_ptr<float>();
  }
  for (int i = 0; i <= args.sources; ++i) args.start[i] = s.start[i];
  args.partial_bf16 = first.scalar_type() == at::kBFloat16;
  args.out_bf16 = out_dtype == at::kBFloat16;
  args.out = out.data_ptr();
  args.in_place_first = in_place;
  const auto stream = c10::cuda::getCurrentCUDAStream(first.device().index()).stream();
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
  m.lists_written = true;
  m.written = plan.merge_written;
  if (plan.merge_written_capacity > 0) m.written.resize(static_cast<size_t>(plan.merge_written_capacity), -1);
  if (plan.max_entries > merge::kMaxEntries)
    throw std::invalid_argument("attention merge: a row in " + std::to_string(plan.max_entries) + " tiers (at most " +
                                std::to_string(merge::kMaxEntries) + ")");
  if (device.is_cuda()) {
    m.begin_on_device = at::tensor(at::ArrayRef<int32_t>(m.begin), at::kInt);
    m.entry_on_device = at::tensor(at::ArrayRef<int32_t>(m.entry), at::kInt);
    m.written_on_device = at::tensor(at::ArrayRef<int32_t>(m.written), at::kInt);
  }
  return m;
}

PartialResult stacked_tiers(const std::vector<PartialResult>& parts) {
  std::vector<at::Tensor> outs, lses;
  for (const auto& p : parts) {
    outs.push_back(p.out);
    lses.push_back(p.lse);
  }
  return {at::cat(outs), at::cat(lses, 1)};
}

at::Tensor merge_attention(const DeviceMerge& merge, const std::vector<PartialResult>& parts, at::ScalarType out_dtype, bool first_holds_every_row) {
  const int64_t rows = static_cast<int64_t>(merge.begin.size()) - 1;
#if TQ_CUDA
  if (!parts.empty() && parts[0].out.is_cuda()) {
    const auto s = sources_of(parts, /*keep_bf16=*/true);
    return merge_on_cuda(merge, s, out_dtype, first_holds_every_row && in_place_first(s, parts, rows, out_dtype));
  }
#endif
  const auto s = sources_of(parts, /*keep_bf16=*/false);
  return merge_on_cpu(merge, s, out_dtype, first_holds_every_row && in_place_first(s, parts, rows, out_dtype));
}

}  // namespace tq
