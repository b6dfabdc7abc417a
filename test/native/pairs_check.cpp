// Attention's mix on the vdpbf16ps family, two keys per instruction, checked
// without torch: the shared text of a batch's questions
// (csrc/batch/shared_prefix.h), the key pairs (csrc/kernels/cpu/attention/key_pairs.h)
// and the GEMM (gemm_dpbf16.cpp) together. One query's mixed values must be
// the same bits as when its question is asked alone, in random batches: long
// and short states of either parity, several states, questions that share an
// option list or are asked twice (shared segments of every length), the step
// starting and cut anywhere around the query, chunks read from a pair before
// its first key, runs of unseen keys left out (a chunk's hole), and the rows
// and panels at addresses shifted by every multiple of 4 bytes up to 64.
//
// It runs the instruction itself where the CPU has it, and everywhere a plain
// model of it (dpbf16_model.h), so that a layout that pairs a query's keys
// otherwise shows on any CPU. Values span 2^-12 to 2^12 so that the order of
// the adds changes the rounding. Two controls must differ somewhere, or this
// check could not see what it looks for: the keys paired as they lie (no gaps),
// and shared segments cut in the middle of a pair (the fault an Intel Xeon
// showed under load: a question's keys at the cut one instruction alone, two
// beside a question sharing its text).
// Prints one JSON line per arithmetic; test/kernels/cpu.test.ts reads them.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "batch/shared_prefix.h"
#include "dpbf16_model.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/attention/key_pairs.h"

using namespace tq;

namespace {

constexpr int64_t kDim = 64;

uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}
// A deterministic value in [-1, 1) from a hash.
float unit(uint64_t h) { return static_cast<float>(mix64(h) >> 40) / static_cast<float>(1 << 23) - 1.0f; }

struct Request {
  int64_t state;                              // which state (its length: states[state])
  std::vector<std::vector<int64_t>> questions;  // token ids
};

// A step's keys as step_plan.cpp lays them out (segment by segment, parents
// first, each segment's keys in position order), and which of them the query sees.
struct Layout {
  std::vector<int64_t> positions, segments;
  std::vector<uint64_t> ids;  // a key's identity: its state and the tokens up to it (shared text is the same key)
  std::vector<char> seen;     // visible to the query
};

struct Batch {
  std::vector<int64_t> states;  // lengths
  std::vector<Request> requests;
};

// A token list's identity after its first i + 1 tokens, per i.
std::vector<uint64_t> prefix_ids(uint64_t state_id, const std::vector<int64_t>& tokens) {
  std::vector<uint64_t> out;
  uint64_t h = mix64(state_id + 0x9e3779b97f4a7c15ull);
  for (int64_t t : tokens) out.push_back(h = mix64(h ^ static_cast<uint64_t>(t + 1) * 0x100000001b3ull));
  return out;
}

// The flat token list of a batch as pack_requests.cpp packs it (step_keys
// takes a step's keys from it).
struct Packed {
  std::vector<int64_t> position, segment, parent, root;
  std::vector<uint64_t> id;
  int64_t target_segment = -1, target_first = -1;  // the target question's own segment and its first flat index
};

// align_shift: 0 packs as the engine does; 1 aligns shared text for a state one
// token longer, so that it ends mid-pair (the control).
Packed pack(const Batch& b, size_t target_request, size_t target_question, int64_t align_shift) {
  Packed p;
  int64_t seg = 0;
  std::vector<char> packed_state(b.states.size(), 0);
  for (const auto& first : b.requests) {
    if (packed_state[first.state]) continue;
    packed_state[first.state] = 1;
    const int64_t s_len = b.states[first.state], root = seg++;
    for (int64_t i = 0; i < s_len; ++i) {
      p.position.push_back(i);
      p.segment.push_back(root);
      p.parent.push_back(root);
      p.root.push_back(root);
      p.id.push_back(mix64(static_cast<uint64_t>(first.state) * 1000003 + i));
    }
    std::vector<const std::vector<int64_t>*> tokens;
    std::vector<int64_t> readout;
    std::vector<std::pair<size_t, size_t>> owner;
    for (size_t r = 0; r < b.requests.size(); ++r)
      if (b.requests[r].state == first.state)
        for (size_t q = 0; q < b.requests[r].questions.size(); ++q) {
          tokens.push_back(&b.requests[r].questions[q]);
          readout.push_back(static_cast<int64_t>(b.requests[r].questions[q].size()) - 1);
          owner.emplace_back(r, q);
        }
    const auto add = [&](const std::vector<int64_t>& t, int64_t from, int64_t to, int64_t segment, int64_t parent) {
      const auto ids = prefix_ids(static_cast<uint64_t>(first.state), t);
      for (int64_t i = from; i < to; ++i) {
        p.position.push_back(s_len + i);
        p.segment.push_back(segment);
        p.parent.push_back(parent);
        p.root.push_back(root);
        p.id.push_back(ids[static_cast<size_t>(i)]);
      }
    };
    for (const auto& run : plan_shared_prefixes(tokens, readout, s_len + align_shift)) {
      int64_t parent = root;
      if (run.shared_tokens > 0) {
        parent = seg++;
        add(*tokens[run.members.front()], 0, run.shared_tokens, parent, root);
      }
      for (size_t m : run.members) {
        const int64_t own = seg++;
        if (owner[m] == std::make_pair(target_request, target_question)) {
          p.target_segment = own;
          p.target_first = static_cast<int64_t>(p.position.size());
        }
        add(*tokens[m], run.shared_tokens, static_cast<int64_t>(tokens[m]->size()), own, parent);
      }
    }
  }
  return p;
}

// The keys of the step whose queries are flat indices [first, last] (step_plan.cpp): every segment a
// query is in, with its parent and root, each up to the step's last query; `query` the flat index seen from.
Layout step_keys(const Packed& p, int64_t first, int64_t last, int64_t query) {
  const int64_t n = static_cast<int64_t>(p.position.size());
  std::vector<char> wanted(static_cast<size_t>(p.segment.back() + 1), 0);
  for (int64_t i = first; i <= last; ++i) wanted[p.segment[i]] = wanted[p.parent[i]] = wanted[p.root[i]] = 1;
  Layout l;
  const int64_t qs = p.segment[query];
  for (int64_t i = 0; i <= std::min(last, n - 1); ++i) {
    if (!wanted[p.segment[i]]) continue;
    l.positions.push_back(p.position[i]);
    l.segments.push_back(p.segment[i]);
    l.ids.push_back(p.id[i]);
    const bool lineage = p.segment[i] == qs || p.segment[i] == p.parent[query] || p.segment[i] == p.root[query];
    l.seen.push_back(lineage && p.position[i] <= p.position[query]);
  }
  return l;
}

struct Mixer {
  gemm::Kernel kernel;
  // The query's mixed values over the keys at `order`'s places [from, end) (-1: a gap), leaving out the
  // places [hole_begin, hole_end); rows and panels `shift` bytes past where they would be.
  std::vector<float> operator()(const Layout& l, uint64_t query_id, const std::vector<int64_t>& order, int64_t from, int64_t hole_begin,
                                int64_t hole_end, int64_t shift) const {
    std::vector<int64_t> places;
    for (int64_t i = from; i < static_cast<int64_t>(order.size()); ++i)
      if (i < hole_begin || i >= hole_end) places.push_back(order[static_cast<size_t>(i)]);
    if (places.size() % 2) places.push_back(-1);  // attention's mix runs an even K
    const int64_t k = static_cast<int64_t>(places.size());
    std::vector<char> probs_bytes(static_cast<size_t>(k) * 2 + 64), values_bytes(static_cast<size_t>(k * kDim) * 2);
    auto* probs = reinterpret_cast<uint16_t*>(probs_bytes.data() + shift);
    std::memset(probs_bytes.data(), 0, probs_bytes.size());
    auto* values = reinterpret_cast<uint16_t*>(values_bytes.data());
    std::memset(values_bytes.data(), 0, values_bytes.size());
    for (int64_t i = 0; i < k; ++i) {
      const int64_t key = places[static_cast<size_t>(i)];
      if (key < 0) continue;
      const uint64_t id = l.ids[static_cast<size_t>(key)];
      for (int64_t d = 0; d < kDim; ++d)
        values[i * kDim + d] = bf16_of(unit(id * 131 + d) * std::ldexp(1.0f, static_cast<int>(unit(id * 977 + d) * 12)));
      if (l.seen[static_cast<size_t>(key)])
        probs[i] = bf16_of((0.5f + 0.5f * unit(id * 7 ^ query_id)) * std::ldexp(1.0f, -static_cast<int>(4 + 4 * unit(id * 3 ^ query_id))));
    }
    std::vector<char> packed(kernel.packed_bytes(kDim, k) + 64);
    const auto value_rows = gemm::rows_every(values, k, kDim * 2);
    kernel.pack(gemm::PackSource{value_rows.data(), false}, kDim, k, packed.data() + shift);
    std::vector<char> out_bytes(kDim * sizeof(float) + 64);
    auto* out = reinterpret_cast<float*>(out_bytes.data() + shift);
    kernel.run(gemm::GemmOperands{probs, packed.data() + shift, out, nullptr, 1, k, kDim, k, kDim, false, false}, 0, kernel.panels(kDim));
    return std::vector<float>(out, out + kDim);
  }
};

std::vector<int64_t> as_they_lie(const Layout& l) {
  std::vector<int64_t> order(l.positions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  return order;
}

// The places of `order` no visible key is in, as runs of whole pairs [begin, end) after `from`.
std::vector<std::pair<int64_t, int64_t>> unseen_runs(const Layout& l, const std::vector<int64_t>& order, int64_t from) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t t = from / 2; 2 * t < static_cast<int64_t>(order.size()); ++t) {
    bool any = false;
    for (int64_t i = 2 * t; i < std::min<int64_t>(2 * t + 2, static_cast<int64_t>(order.size())); ++i)
      any |= order[static_cast<size_t>(i)] >= 0 && l.seen[static_cast<size_t>(order[static_cast<size_t>(i)])];
    if (any) continue;
    if (!runs.empty() && runs.back().second == 2 * t) runs.back().second += 2;
    else runs.emplace_back(2 * t, 2 * t + 2);
  }
  return runs;
}

struct Counts {
  int64_t compared = 0, differing = 0, shifted = 0, shifted_differing = 0, naive_differing = 0, split_compared = 0, split_differing = 0;
};

// Random batches around one target question; every layout of its keys against the question alone.
void check(const Mixer& mix, uint32_t seed, Counts& c) {
  std::mt19937 rng(seed);
  const auto below = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint32_t>(n)); };
  // Question texts: a template opening, an option list some of them share, a tail of their own.
  std::vector<std::vector<int64_t>> options(3);
  for (auto& o : options)
    for (int64_t i = 0, n = 2 + below(12); i < n; ++i) o.push_back(100 + below(50));
  std::vector<std::vector<int64_t>> texts(6);
  for (auto& t : texts) {
    for (int64_t i = 0, n = below(5); i < n; ++i) t.push_back(i + 1);
    if (below(4)) {
      const auto& o = options[static_cast<size_t>(below(3))];
      t.insert(t.end(), o.begin(), o.end());
    }
    for (int64_t i = 0, n = 1 + below(6); i < n; ++i) t.push_back(200 + below(100));
  }
  Batch b;
  for (int64_t i = 0, n = 1 + below(3); i < n; ++i) b.states.push_back(below(3) ? 1 + below(40) : 200 + below(200));
  for (int64_t r = 0, n = 1 + below(5); r < n; ++r) {
    Request req{below(static_cast<int64_t>(b.states.size())), {}};
    for (int64_t q = 0, m = 1 + below(4); q < m; ++q) req.questions.push_back(texts[static_cast<size_t>(below(6))]);
    b.requests.push_back(req);
  }
  const size_t tr = static_cast<size_t>(below(static_cast<int64_t>(b.requests.size())));
  const size_t tq = static_cast<size_t>(below(static_cast<int64_t>(b.requests[tr].questions.size())));
  const Batch alone{b.states, {{b.requests[tr].state, {b.requests[tr].questions[tq]}}}};
  const Packed ref_packed = pack(alone, 0, 0, 0), batch_packed = pack(b, tr, tq, 0), split_packed = pack(b, tr, tq, 1);
  const int64_t length = static_cast<int64_t>(b.requests[tr].questions[tq].size());
  for (int64_t back : {0, 1}) {
    if (back >= length) continue;
    // The query: the question's readout token or the one before, by its identity (the same in every layout).
    const int64_t at = length - 1 - back;
    const uint64_t query_id = prefix_ids(static_cast<uint64_t>(b.requests[tr].state), b.requests[tr].questions[tq])[static_cast<size_t>(at)];
    const auto query_in = [&](const Packed& p) {
      for (int64_t i = 0; i < static_cast<int64_t>(p.position.size()); ++i)
        if (p.id[i] == query_id && (p.segment[i] == p.target_segment || p.parent[p.target_first] == p.segment[i]))
          return i;
      return int64_t{-1};
    };
    const auto whole = [&](const Packed& p) { return step_keys(p, 0, static_cast<int64_t>(p.position.size()) - 1, query_in(p)); };
    const Layout ref_layout = whole(ref_packed);
    const auto ref_pairs = pair_keys(ref_layout.positions.data(), ref_layout.segments.data(), static_cast<int64_t>(ref_layout.positions.size()));
    const auto reference = mix(ref_layout, query_id, ref_pairs, 0, 0, 0, 0);
    const auto naive_reference = mix(ref_layout, query_id, as_they_lie(ref_layout), 0, 0, 0, 0);
    const auto same = [&](const std::vector<float>& got) { return std::memcmp(got.data(), reference.data(), kDim * sizeof(float)) == 0; };

    for (int64_t shift = 4; shift <= 64; shift += 4) {
      ++c.shifted;
      c.shifted_differing += !same(mix(ref_layout, query_id, ref_pairs, 0, 0, 0, shift));
    }
    const int64_t q = query_in(batch_packed), n = static_cast<int64_t>(batch_packed.position.size());
    for (int trial = 0; trial < 6; ++trial) {
      // The step: from anywhere at or before the query to anywhere at or after it.
      const int64_t first = trial == 0 ? 0 : below(q + 1), last = trial == 0 ? n - 1 : q + below(n - q);
      const Layout l = step_keys(batch_packed, first, last, q);
      const auto pairs = pair_keys(l.positions.data(), l.segments.data(), static_cast<int64_t>(l.positions.size()));
      // A chunk reads from its first pair any of its queries sees: here at 0, or at the query's first key's pair.
      int64_t first_seen = 0;
      while (pairs[static_cast<size_t>(first_seen)] < 0 || !l.seen[static_cast<size_t>(pairs[static_cast<size_t>(first_seen)])]) ++first_seen;
      const int64_t from = trial % 2 ? first_seen - first_seen % 2 : 0;
      const auto holes = unseen_runs(l, pairs, from);
      const auto hole = holes.empty() || trial < 2 ? std::pair<int64_t, int64_t>{0, 0} : holes[static_cast<size_t>(below(static_cast<int64_t>(holes.size())))];
      ++c.compared;
      c.differing += !same(mix(l, query_id, pairs, from, hole.first, hole.second, trial * 4));
      if (trial == 0) {
        const auto naive = mix(l, query_id, as_they_lie(l), 0, 0, 0, 0);
        c.naive_differing += std::memcmp(naive.data(), naive_reference.data(), kDim * sizeof(float)) != 0;
        // The control: shared segments ending mid-pair.
        const int64_t sq = query_in(split_packed);
        const Layout sl = step_keys(split_packed, 0, static_cast<int64_t>(split_packed.position.size()) - 1, sq);
        if (split_packed.parent[split_packed.target_first] != split_packed.root[split_packed.target_first]) {
          ++c.split_compared;
          c.split_differing += !same(mix(sl, query_id, pair_keys(sl.positions.data(), sl.segments.data(), static_cast<int64_t>(sl.positions.size())), 0, 0, 0, 0));
        }
      }
    }
  }
}

// Where the CPU has vdpbf16ps: the model's bits against the instruction's, over random panels of the
// check's value ranges (the model stands in for it on other CPUs, so it must be it).
int64_t model_differing() {
  std::mt19937 rng(7);
  int64_t differing = 0;
  for (int64_t trial = 0; trial < 200; ++trial) {
    const int64_t m = 1 + trial % 7, k = 2 * (1 + static_cast<int64_t>(rng() % 700));
    std::vector<uint16_t> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(k * kDim));
    for (auto& v : x) v = bf16_of(unit(rng()) * std::ldexp(1.0f, -static_cast<int>(rng() % 9)));
    for (auto& v : w) v = bf16_of(unit(rng()) * std::ldexp(1.0f, static_cast<int>(rng() % 25) - 12));
    std::vector<float> got[2];
    const gemm::Kernel kernels[2] = {gemm::dpbf16_model_kernel(), gemm::dpbf16_kernel()};
    for (int i = 0; i < 2; ++i) {
      std::vector<char> packed(kernels[i].packed_bytes(kDim, k));
      const auto w_rows = gemm::rows_every(w.data(), k, kDim * 2);
      kernels[i].pack(gemm::PackSource{w_rows.data(), false}, kDim, k, packed.data());
      got[i].resize(static_cast<size_t>(m * kDim));
      kernels[i].run(gemm::GemmOperands{x.data(), packed.data(), got[i].data(), nullptr, m, k, kDim, k, kDim, false, false}, 0, kernels[i].panels(kDim));
    }
    for (size_t i = 0; i < got[0].size(); ++i) differing += std::memcmp(&got[0][i], &got[1][i], sizeof(float)) != 0;
  }
  return differing;
}

}  // namespace

int main() {
  const bool hardware = best_isa() >= Isa::Avx512Bf16;
  std::vector<std::pair<std::string, gemm::Kernel>> arithmetics = {{"model", gemm::dpbf16_model_kernel()}};
  if (hardware) arithmetics.emplace_back("vdpbf16ps", gemm::dpbf16_kernel());
  const int64_t model_vs_hardware = hardware ? model_differing() : -1;  // -1: nothing to compare with
  for (const auto& [name, kernel] : arithmetics) {
    Counts c;
    for (uint32_t seed = 1; seed <= 300; ++seed) check(Mixer{kernel}, seed, c);
    std::printf(
        "{\"arithmetic\": \"%s\", \"compared\": %ld, \"differing\": %ld, \"shifted\": %ld, \"shiftedDiffering\": %ld, \"naiveDiffering\": %ld, "
        "\"splitCompared\": %ld, \"splitDiffering\": %ld, \"modelDiffering\": %ld}\n",
        name.c_str(), static_cast<long>(c.compared), static_cast<long>(c.differing), static_cast<long>(c.shifted),
        static_cast<long>(c.shifted_differing), static_cast<long>(c.naive_differing), static_cast<long>(c.split_compared),
        static_cast<long>(c.split_differing), static_cast<long>(model_vs_hardware));
  }
}
