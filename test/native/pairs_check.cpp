// Attention's mix on the vdpbf16ps family, two keys per instruction, checked
// without torch: the key pairs of csrc/kernels/cpu/key_pairs.h and the GEMM of
// gemm_dpbf16.cpp together. One query's mixed values must be the same bits in
// every layout the engine can give its keys: its request alone, beside other
// questions of its state (before or after it, of odd and even lengths), after
// another request, cut at a step boundary, and read from any chunk start.
// The values span 2^-12 to 2^12 so that the order of the adds changes the
// rounding; the same layouts with the keys paired as they lie (no gaps) must
// differ somewhere, or this check could not see a wrong pairing.
// Prints one JSON line; test/kernels/cpu.test.ts reads it.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/key_pairs.h"

using namespace tq;

namespace {

constexpr int64_t kDim = 64;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16_bits(u);
}
// A deterministic value in [-1, 1) from a key's identity.
float unit(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return static_cast<float>(h >> 40) / static_cast<float>(1 << 23) - 1.0f;
}

// A key as the query sees it: which request, which part of it, which position.
struct Key {
  int64_t request, role, position;  // role: 0 state, 1 shared text, 2 + j question j
  uint64_t id() const { return (static_cast<uint64_t>(request) * 64 + role) * 100003 + position; }
};

// A request: a state, optional shared text, questions (role, length); positions continue from the parent.
struct Request {
  int64_t id, state, shared;
  std::vector<std::pair<int64_t, int64_t>> questions;
};

struct Layout {
  std::vector<Key> keys;
  std::vector<int64_t> positions, segments;
  void segment(const Key& first, int64_t length, int64_t& next_segment) {
    for (int64_t i = 0; i < length; ++i) {
      keys.push_back({first.request, first.role, first.position + i});
      positions.push_back(first.position + i);
      segments.push_back(next_segment);
    }
    ++next_segment;
  }
};

// Packs requests as step_plan.cpp lays out a step's keys: segment by segment,
// parents first. cut: request 0's question of role `role` stops at position cut.
Layout pack(const std::vector<Request>& requests, int64_t role, int64_t cut) {
  Layout l;
  int64_t seg = 0;
  for (const auto& r : requests) {
    l.segment({r.id, 0, 0}, r.state, seg);
    if (r.shared) l.segment({r.id, 1, r.state}, r.shared, seg);
    for (const auto& [question_role, length] : r.questions) {
      const int64_t start = r.state + r.shared;
      const bool is_cut = r.id == 0 && question_role == role && cut >= 0;
      l.segment({r.id, question_role, start}, is_cut ? cut - start + 1 : length, seg);
    }
  }
  return l;
}

// The query (request, question q, position) mixed over the layout's keys in
// `order` (places; -1 a gap) from place `from`: the vdpbf16ps GEMM of one row
// of numerators against the values packed in that order.
std::vector<float> mix(const Layout& l, const std::vector<int64_t>& order, int64_t from, const Key& query, const gemm::Kernel& kernel) {
  const int64_t k = static_cast<int64_t>(order.size()) - from;
  std::vector<uint16_t> probs(static_cast<size_t>(k), 0), values(static_cast<size_t>(k * kDim), 0);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t key = order[static_cast<size_t>(from + i)];
    if (key < 0) continue;
    const Key& kk = l.keys[static_cast<size_t>(key)];
    for (int64_t d = 0; d < kDim; ++d)
      values[static_cast<size_t>(i * kDim + d)] = to_bf16(unit(kk.id() * 131 + d) * std::ldexp(1.0f, static_cast<int>(unit(kk.id() * 977 + d) * 12)));
    const bool lineage = kk.request == query.request && (kk.role == 0 || kk.role == 1 || kk.role == query.role);
    if (lineage && kk.position <= query.position)
      probs[static_cast<size_t>(i)] = to_bf16((0.5f + 0.5f * unit(kk.id() * 7)) * std::ldexp(1.0f, -static_cast<int>(4 + 4 * unit(kk.id() * 3))));
  }
  std::vector<char> packed(kernel.packed_bytes(kDim, k));
  kernel.pack(values.data(), kDim, k, 1, kDim, packed.data());
  std::vector<float> out(kDim);
  kernel.run(gemm::Job{probs.data(), packed.data(), out.data(), nullptr, 1, k, kDim, k, kDim, false}, 0, kernel.panels(kDim));
  return out;
}

std::vector<int64_t> as_they_lie(const Layout& l) {
  std::vector<int64_t> order(l.keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  return order;
}

}  // namespace

int main() {
  if (best_isa() < Isa::Avx512Bf16) {
    std::printf("{\"skipped\": \"no AVX-512 BF16\"}\n");
    return 0;
  }
  const gemm::Kernel kernel = gemm::dpbf16_kernel();
  int64_t compared = 0, differing = 0, naive_differing = 0;
  for (int64_t state : {37, 40, 301})
    for (int64_t shared : {0, 3, 4}) {
      const Request target{0, state, shared, {{2, 5}, {3, 6}, {4, 7}}};
      const Request other{1, state + 1, 0, {{2, 3}}};
      for (const auto& [role, length] : target.questions) {
        const int64_t last = state + shared + length - 1;
        const Request alone{0, state, shared, {{role, length}}};
        // Cut: a step ending just before the question's last token.
        struct Case {
          std::vector<Request> requests;
          int64_t cut;
        };
        const std::vector<Case> cases = {{{alone}, -1}, {{target}, -1}, {{other, target}, -1}, {{target, other}, -1}, {{other, target}, last - 1}};
        for (int64_t position : {last - 1, last}) {
          std::vector<float> first, first_naive;
          for (const auto& c : cases) {
            if (c.cut >= 0 && position > c.cut) continue;
            const Layout l = pack(c.requests, role, c.cut);
            const Key query{0, role, position};
            const auto pairs = pair_keys(l.positions.data(), l.segments.data(), static_cast<int64_t>(l.keys.size()));
            const auto naive = as_they_lie(l);
            // Chunks start at a pair: at 0, or at the last pair start before the query's first key.
            size_t first_key = 0;
            while (pairs[first_key] < 0 || l.keys[static_cast<size_t>(pairs[first_key])].request != 0) ++first_key;
            for (int64_t from : {size_t{0}, first_key - first_key % 2}) {
              const auto got = mix(l, pairs, from, query, kernel);
              const auto got_naive = mix(l, naive, 0, query, kernel);
              if (first.empty()) {
                first = got;
                first_naive = got_naive;
                continue;
              }
              ++compared;
              differing += std::memcmp(got.data(), first.data(), kDim * sizeof(float)) != 0;
              naive_differing += std::memcmp(got_naive.data(), first_naive.data(), kDim * sizeof(float)) != 0;
            }
          }
        }
      }
    }
  std::printf("{\"compared\": %ld, \"differing\": %ld, \"naiveDiffering\": %ld}\n", static_cast<long>(compared), static_cast<long>(differing),
              static_cast<long>(naive_differing));
}
