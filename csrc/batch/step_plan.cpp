#include "batch/step_plan.h"

#include <algorithm>

namespace tq {
namespace {

at::Tensor long_tensor(const std::vector<int64_t>& v) {
  return at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong));
}

// values[i] for each i of `index`, as a tensor: gathered on the host in one pass (a step is planned before every
// launch, a warm question's too; each tensor op costs the host microseconds).
at::Tensor gathered(const std::vector<int64_t>& values, const std::vector<int64_t>& index) {
  auto out = at::empty({static_cast<int64_t>(index.size())}, at::TensorOptions().dtype(at::kLong));
  int64_t* to = out.data_ptr<int64_t>();
  for (size_t i = 0; i < index.size(); ++i) to[i] = values[index[i]];
  return out;
}

// The step's M-RoPE positions and image embeddings (a multimodal call).
void add_images(const PackedTokens& packed, const at::Tensor& image_embeds, const std::vector<int64_t>& queries, const at::Tensor& q_index,
                StepBatch& batch) {
  const int64_t n = static_cast<int64_t>(packed.ids.size());
  batch.rope_positions = long_tensor(packed.rope_positions).view({n, 3}).index_select(0, q_index);
  std::vector<int64_t> rows, embed_rows;
  for (size_t qi = 0; qi < queries.size(); ++qi)
    if (packed.embed_rows[queries[qi]] >= 0) {
      rows.push_back(static_cast<int64_t>(qi));
      embed_rows.push_back(packed.embed_rows[queries[qi]]);
    }
  if (rows.empty()) return;
  batch.image_rows = long_tensor(rows);
  batch.image_embeds = image_embeds.index_select(0, long_tensor(embed_rows).to(image_embeds.device()));
}

}  // namespace

std::vector<Step> plan_steps(const PackedTokens& packed, const std::vector<int64_t>& slots, const std::vector<int64_t>& compute,
                             int64_t max_step_tokens, const at::Tensor& image_embeds) {
  const auto& lens = packed.segment_lengths;
  const size_t n_seg = lens.size();
  const int64_t n = static_cast<int64_t>(packed.ids.size());
  const auto seg_start = packed.segment_offsets();
  const auto segments = packed.segments();
  const auto positions = packed.positions(), parents = packed.parents(), roots = packed.roots();
  const auto long_rope = packed.any_long_rope() ? packed.long_rope() : std::vector<int64_t>();
  std::vector<int64_t> out_of_row(n, -1);
  for (size_t r = 0; r < packed.output_rows.size(); ++r) out_of_row[packed.output_rows[r]] = static_cast<int64_t>(r);

  std::vector<Step> steps;
  const int64_t n_compute = static_cast<int64_t>(compute.size());
  for (int64_t a = 0; a < n_compute; a += max_step_tokens) {
    const int64_t b = std::min(n_compute, a + max_step_tokens);
    const std::vector<int64_t> queries(compute.begin() + a, compute.begin() + b);
    const int64_t last = queries.back();
    Step step;
    // Keys: the tokens up to the step's last query of every segment a query is in, and of its ancestors.
    std::vector<char> wanted(n_seg, 0);
    for (auto q : queries) {
      const auto s = segments[q];
      wanted[s] = wanted[packed.segment_parents[s]] = wanted[packed.segment_roots[s]] = 1;
      step.state_queries += packed.is_root(segments[q]);
    }
    std::vector<int64_t> keys, key_end(queries.size());
    for (size_t s = 0; s < n_seg; ++s)
      if (wanted[s])
        for (int64_t i = seg_start[s]; i < std::min(last + 1, seg_start[s] + lens[s]); ++i) keys.push_back(i);
    std::vector<int64_t> local_rows;
    for (size_t j = 0, qi = 0; j < keys.size() && qi < queries.size(); ++j)
      if (keys[j] == queries[qi]) key_end[qi++] = static_cast<int64_t>(j) + 1;
    for (size_t qi = 0; qi < queries.size(); ++qi)
      if (out_of_row[queries[qi]] >= 0) {
        local_rows.push_back(static_cast<int64_t>(qi));
        step.output_index.push_back(out_of_row[queries[qi]]);
      }
    step.batch = StepBatch{gathered(packed.ids, queries), gathered(positions, queries), gathered(segments, queries),
                           gathered(parents, queries),    gathered(roots, queries),     gathered(slots, queries),
                           key_end,
                           gathered(slots, keys),         gathered(positions, keys),    gathered(segments, keys),
                           local_rows};
    if (packed.multimodal) add_images(packed, image_embeds, queries, long_tensor(queries), step.batch);
    if (!long_rope.empty()) step.batch.long_rope = gathered(long_rope, queries);
    steps.push_back(std::move(step));
  }
  return steps;
}

std::vector<int32_t> key_rows_of(const StepBatch& step) {
  std::vector<int32_t> rows(static_cast<size_t>(step.key_slots.size(0)), -1);
  for (size_t r = 0; r < step.key_end.size(); ++r) rows[static_cast<size_t>(step.key_end[r] - 1)] = static_cast<int32_t>(r);
  return rows;
}

}  // namespace tq
