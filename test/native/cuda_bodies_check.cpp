// The CUDA row, merge and readout kernels' bodies themselves (kernels/cuda/row_kernels.cuh, attention_merge.cuh,
// label_readout.cuh), run on the host through kernels/cuda/host_emulation.h with the launch shapes the launches take
// (their grids, blocks, shared memory and quad or strided form), lanes, shuffles and barriers included, against the
// host forms the CPU runs (kernels/fused/row_kernels_host.h; the CPU's merge, merge_attention; the readout's functions
// as engine/readout.cpp runs them). What the host forms' own checks
// (row_kernels_check.cpp, readout_twin.cpp) cannot see, a kernel's indexing, is checked here without a GPU.
// Prints one JSON line a case: elements compared, elements whose bits differ, and the form the launch took.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cascade/attention_merge.h"
#include "kernels/cuda/host_emulation.h"
#include "kernels/cuda/attention_merge.cuh"
#include "kernels/cuda/few_rows_mma.cuh"
#include "kernels/cuda/label_readout.cuh"
#include "kernels/cuda/row_kernels.cuh"
#include "kernels/cuda/split_key_attention.cuh"
#include "kernels/fused/row_kernels_host.h"

using namespace tq;

namespace {

std::mt19937 rng(7);

std::vector<float> randoms(size_t n, float scale = 1.0f, float offset = 0.0f) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + scale * normal(rng);
  return v;
}

std::vector<uint16_t> bf16s(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = exact::narrow_bf16(v[i]);
  return out;
}

template <typename T>
int64_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

void report(const std::string& kernel, const std::string& form, int64_t compared, int64_t differ) {
  std::printf("{\"kernel\":\"%s\",\"form\":\"%s\",\"compared\":%lld,\"differing\":%lld}\n", kernel.c_str(), form.c_str(), (long long)compared,
              (long long)differ);
}

template <typename Args>
void run(void (*kernel)(Args), const Args& args, const cuda::Launch& launch) {
  emulation::run_grid(kernel, args, launch.grid, launch.block, launch.shared_bytes);
}

// The kernel's body in the form its launch takes (the quad or the strided instance), or the host form; whether quads.
template <typename Args>
bool run_as_launched(bool kernel, void (*quads)(Args), void (*strided)(Args), void (*host)(const Args&), const Args& args, const cuda::Launch& launch) {
  if (!kernel) host(args);
  else run(launch.quads ? quads : strided, args, launch);
  return launch.quads;
}

// with_addend false: the residual alone normed (a forward's first norm), left as it is.
void add_rms_norm(int n, bool addend_bf16, bool out_bf16, bool with_addend = true) {
  const int rows_n = 5;
  const auto residual = randoms(size_t(rows_n) * n, 3.0f), addend32 = randoms(size_t(rows_n) * n), weight = randoms(n, 1.0f, 1.0f);
  const auto addend16 = bf16s(addend32);
  const void* addend = !with_addend ? nullptr : addend_bf16 ? static_cast<const void*>(addend16.data()) : addend32.data();
  auto run_one = [&](bool kernel, std::vector<float>& res, std::vector<float>& out32, std::vector<uint16_t>& out16) {
    res = residual;
    out32.assign(residual.size(), 0.0f);
    out16.assign(residual.size(), 0);
    rows::AddRmsNormArgs a{rows_n, n, res.data(), addend, addend_bf16, n, weight.data(), 1e-6f, out_bf16 ? static_cast<void*>(out16.data()) : out32.data(), out_bf16};
    if (kernel) run(cuda::add_rms_norm_kernel, a, cuda::add_rms_norm_launch(a));
    else rows::add_rms_norm_host(a);
  };
  std::vector<float> kr, ko32, hr, ho32;
  std::vector<uint16_t> ko16, ho16;
  run_one(true, kr, ko32, ko16);
  run_one(false, hr, ho32, ho16);
  report("add_rms_norm n=" + std::to_string(n) + (!with_addend ? " no addend" : addend_bf16 ? " bf16 addend" : "") + (out_bf16 ? " bf16 out" : ""), "rows",
         int64_t(kr.size()) * 2, differing(kr, hr) + (out_bf16 ? differing(ko16, ho16) : differing(ko32, ho32)));
}

// q, k and v heads of `tokens` tokens through the norm (where `norms`) and RoPE (where `rope`), into q's output, the
// cache's slots and the step's keys; bf16 with head dim 128 takes the quad form, fp32 the strided one.
// heads, kv_heads: 4 and 2 (a warp a head in the quad form's block per token), or 28 and 4 (36 heads: the quad form's
// warps take 4 heads at once, then the last 4 in a second pass).
void qk_norm_rope(bool bf16, int dim, bool norms, bool rope, int heads = 4, int kv_heads = 2) {
  const int tokens = 5, slots_n = 11, table_rows = 16, width = (heads + 2 * kv_heads) * dim;
  const auto qkv32 = randoms(size_t(tokens) * width, 2.0f), q_norm = randoms(dim, 0.5f, 1.0f), k_norm = randoms(dim, 0.5f, 1.0f);
  const auto cos = randoms(size_t(table_rows) * dim), sin = randoms(size_t(table_rows) * dim);
  const auto qkv16 = bf16s(qkv32);
  const std::vector<int64_t> rope_rows = {3, 0, 15, 7, 7}, slots = {10, 2, 5, 0, 8};
  const size_t elem = bf16 ? 2 : 4;
  struct Out {
    std::vector<unsigned char> q, k_cache, v_cache, k_step, v_step;
  };
  auto run_one = [&](bool kernel, bool& quads) {
    Out o{std::vector<unsigned char>(size_t(tokens) * heads * dim * elem), std::vector<unsigned char>(size_t(slots_n) * kv_heads * dim * elem),
          std::vector<unsigned char>(size_t(slots_n) * kv_heads * dim * elem), std::vector<unsigned char>(size_t(tokens) * kv_heads * dim * elem),
          std::vector<unsigned char>(size_t(tokens) * kv_heads * dim * elem)};
    rows::QkNormRopeArgs a{tokens, heads, kv_heads, dim, bf16 ? static_cast<const void*>(qkv16.data()) : qkv32.data(), bf16, width,
                           norms ? q_norm.data() : nullptr, norms ? k_norm.data() : nullptr, 1e-6f, cos.data(), sin.data(),
                           rope ? rope_rows.data() : nullptr, o.q.data(), o.k_cache.data(), o.v_cache.data(), slots.data(), o.k_step.data(),
                           o.v_step.data(), bf16};
    quads = run_as_launched(kernel, cuda::qk_norm_rope_kernel<true>, cuda::qk_norm_rope_kernel<false>, rows::qk_norm_rope_host, a,
                            cuda::qk_norm_rope_launch(a));
    return o;
  };
  bool quads = false, unused = false;
  const Out k = run_one(true, quads), h = run_one(false, unused);
  const int64_t differ = differing(k.q, h.q) + differing(k.k_cache, h.k_cache) + differing(k.v_cache, h.v_cache) + differing(k.k_step, h.k_step) +
                         differing(k.v_step, h.v_step);
  report(std::string("qk_norm_rope ") + (bf16 ? "bf16" : "fp32") + " dim=" + std::to_string(dim) + " heads=" + std::to_string(heads) + "+2x" +
             std::to_string(kv_heads) + (norms ? " norms" : "") + (rope ? " rope" : ""),
         quads ? "quads" : "strided", int64_t(k.q.size() + k.k_cache.size() + k.v_cache.size() + k.k_step.size() + k.v_step.size()) / int64_t(elem), differ);
}

void gated_mul(bool bf16, int n, bool gelu) {
  const int rows_n = 3;
  const auto gate_up32 = randoms(size_t(rows_n) * 2 * n, 2.0f);
  const auto gate_up16 = bf16s(gate_up32);
  const size_t elem = bf16 ? 2 : 4;
  auto run_one = [&](bool kernel, bool& quads) {
    std::vector<unsigned char> out(size_t(rows_n) * n * elem);
    const char* base = bf16 ? reinterpret_cast<const char*>(gate_up16.data()) : reinterpret_cast<const char*>(gate_up32.data());
    rows::GatedMulArgs a{rows_n, n, base, base + n * elem, 2 * n, bf16, gelu, out.data()};
    quads = run_as_launched(kernel, cuda::gated_mul_kernel<true>, cuda::gated_mul_kernel<false>, rows::gated_mul_host, a, cuda::gated_mul_launch(a));
    return out;
  };
  bool quads = false, unused = false;
  const auto k = run_one(true, quads), h = run_one(false, unused);
  report(std::string("gated_mul ") + (bf16 ? "bf16" : "fp32") + " n=" + std::to_string(n) + (gelu ? " gelu" : " silu"), quads ? "quads" : "strided",
         int64_t(k.size() / elem), differing(k, h));
}

// Rows whose entries lie in two sources (tiers), merged into a new array or in place over the first source (every row
// visited, or the rows it writes listed: CascadePlan::merge_written, -1 past them), against the CPU's merge
// (merge_attention) of the same tiers' results.
void attention_merge(bool bf16, bool in_place, bool listed = false) {
  const int heads = 3, dim = 128, rows_n = 6, second_rows = 4;  // source 0: a row each (row r's entry r); source 1: rows 6..9
  const DeviceMerge m{{0, 2, 3, 5, 6, 8, 9}, {0, 6, 1, 2, 7, 3, 4, 8, 5}, {}, {}};  // rows 1, 3 and 5 in their own tier alone
  const auto dtype = bf16 ? at::kBFloat16 : at::kFloat;
  const std::vector<PartialResult> parts = {{at::randn({rows_n, heads, dim}).to(dtype), at::randn({heads, rows_n}) * 2},
                                            {at::randn({second_rows, heads, dim}).to(dtype), at::randn({heads, second_rows}) * 2}};
  // The kernel, over copies (in place it writes into the first).
  auto first = parts[0].out.clone(), second = parts[1].out.clone(), out = at::empty_like(first);
  cuda::AttentionMergeArgs a{};
  a.rows = rows_n, a.heads = heads, a.dim = dim, a.merge_begin = m.begin.data(), a.merge_entry = m.entry.data(), a.sources = 2;
  a.partial[0] = first.data_ptr(), a.partial[1] = second.data_ptr(), a.lse[0] = parts[0].lse.data_ptr<float>(), a.lse[1] = parts[1].lse.data_ptr<float>();
  a.start[0] = 0, a.start[1] = rows_n, a.start[2] = rows_n + second_rows;
  a.partial_bf16 = bf16, a.out_bf16 = bf16, a.in_place_first = in_place, a.out = in_place ? first.data_ptr() : out.data_ptr();
  const std::vector<int32_t> written{0, 2, 4, -1};  // the rows of two entries
  if (listed) a.merge_written = written.data(), a.written = static_cast<int>(written.size());
  const auto grid = cuda::attention_merge_grid(a), block = cuda::attention_merge_block();
  if (bf16) emulation::run_grid(cuda::attention_merge_kernel<uint16_t, uint16_t>, a, grid, block, 0);
  else emulation::run_grid(cuda::attention_merge_kernel<float, float>, a, grid, block, 0);
  const auto got = in_place ? first : out;
  const auto want = merge_attention(m, parts, dtype);
  const auto bits = [&](const at::Tensor& t) { return t.contiguous().view(bf16 ? at::kShort : at::kInt); };
  report(std::string("attention_merge ") + (bf16 ? "bf16" : "fp32") + (in_place ? " in place" : "") + (listed ? ", rows listed" : ""), "held", got.numel(),
         bits(got).ne(bits(want)).sum().item<int64_t>());
}

// Questions of 1, 5 and 12 labels over a hidden size with a tail past the lanes' blocks; each expected logit as the
// CPU readout forms it (label_readout_math.h: the lanes' partials combined in the warp's tree, soft-capped), then
// the question's log-probabilities.
void label_readout(bool bf16, float softcap) {
  const int hidden_size = 100, vocab = 40;
  const std::vector<int32_t> offsets = {0, 1, 6, 18};
  const int questions = 3, labels = offsets.back();
  std::vector<int64_t> label_ids(labels);
  for (int i = 0; i < labels; ++i) label_ids[i] = (i * 7 + 3) % vocab;
  const auto hidden = randoms(size_t(questions) * hidden_size), head32 = randoms(size_t(vocab) * hidden_size, 0.3f);
  const auto head16 = bf16s(head32);
  const std::vector<float> temperatures = {1.0f, 0.7f, 2.5f};
  std::vector<float> logits(labels), log_probs(labels);
  cuda::LabelReadoutArgs a{hidden.data(), bf16 ? static_cast<const void*>(head16.data()) : head32.data(), bf16, hidden_size, questions,
                           label_ids.data(), offsets.data(), temperatures.data(), softcap, logits.data(), log_probs.data()};
  if (bf16) emulation::run_grid(cuda::label_readout_kernel<uint16_t>, a, cuda::label_readout_grid(a), cuda::label_readout_block(), 0);
  else emulation::run_grid(cuda::label_readout_kernel<float>, a, cuda::label_readout_grid(a), cuda::label_readout_block(), 0);
  std::vector<float> want_logits(labels), want_log_probs(labels);
  for (int q = 0; q < questions; ++q) {
    for (int i = offsets[q]; i < offsets[q + 1]; ++i) {
      float partial[readout::kLanes];
      for (int l = 0; l < readout::kLanes; ++l)
        partial[l] = bf16 ? readout::lane_partial(head16.data() + label_ids[i] * hidden_size, hidden.data() + size_t(q) * hidden_size, hidden_size, l)
                          : readout::lane_partial(head32.data() + label_ids[i] * hidden_size, hidden.data() + size_t(q) * hidden_size, hidden_size, l);
      want_logits[i] = readout::soft_cap(readout::combine_lanes(partial), softcap);
    }
    readout::log_probs(want_logits.data() + offsets[q], offsets[q + 1] - offsets[q], temperatures[q], want_log_probs.data() + offsets[q]);
  }
  report(std::string("label_readout ") + (bf16 ? "bf16" : "fp32") + (softcap > 0 ? " soft-capped" : ""), "block a question", 2 * labels,
         differing(logits, want_logits) + differing(log_probs, want_log_probs));
}

// Split-key attention's kernel body against its host twin (split_key::attend_row, what the CPU runs): three tiers as
// a layer's are launched together (unmasked, causal, causal in a window that cuts them), each of sequences with 0 to
// 70 keys (a tile's edges among them) and 1 to 4 rows, their keys at scattered slots of one store: bf16 at head dim
// 128 (two 16-byte pieces a thread), soft-capped; and one tier alone, longer or at head dim 256 (main). Small cases:
// every shuffle of an emulated warp is two waits of its 32 fibers. The GPU window runs the kernel itself against the
// twin at every size, dtype and head dim (cascade_check split-key-device). key_counts: each tier's sequences' keys;
// masks: the tiers' (causal, window).
template <typename T>
void split_key_case(int dim, float softcap, const std::vector<int32_t>& key_counts = {0, 33, 70},
                    const std::vector<std::pair<bool, int>>& masks = {{false, -1}, {true, -1}, {true, 20}}) {
  constexpr bool bf16 = sizeof(T) == 2;
  const int heads = 4, kv_heads = 2, q_count = 12;
  struct Tier {
    std::vector<int32_t> cu_q{0}, cu_k{0};
    std::vector<int64_t> q_rows, k_rows;
    int max_rows = 0;
  };
  std::vector<Tier> tiers(masks.size());
  int keys = 0;
  for (size_t m = 0; m < masks.size(); ++m)
    for (const int32_t n : key_counts) {
      const int rows = std::uniform_int_distribution<int>(1, masks[m].first && n > 0 ? std::min(4, n) : 4)(rng);
      for (int r = 0; r < rows; ++r) tiers[m].q_rows.push_back(std::uniform_int_distribution<int>(0, q_count - 1)(rng));
      for (int j = 0; j < n; ++j) tiers[m].k_rows.push_back(keys + j);
      keys += n;
      tiers[m].cu_q.push_back(static_cast<int32_t>(tiers[m].q_rows.size()));
      tiers[m].cu_k.push_back(tiers[m].cu_k.back() + n);
      tiers[m].max_rows = std::max(tiers[m].max_rows, rows);
    }
  // The keys' slots: every other slot of a store twice their number, shuffled.
  std::vector<int64_t> slot(keys);
  for (int i = 0; i < keys; ++i) slot[i] = 2 * i;
  std::shuffle(slot.begin(), slot.end(), rng);
  for (auto& t : tiers)
    for (auto& k : t.k_rows) k = slot[k];
  const auto values = [&](size_t n) {
    const auto v = randoms(n);
    std::vector<T> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = bf16 ? static_cast<T>(exact::narrow_bf16(v[i])) : static_cast<T>(v[i]);
    return out;
  };
  const auto q = values(size_t(q_count) * heads * dim), k_store = values(size_t(2 * keys) * kv_heads * dim), v_store = values(size_t(2 * keys) * kv_heads * dim);
  struct Out {
    std::vector<std::vector<T>> out;
    std::vector<std::vector<float>> lse;
  };
  auto run_one = [&](bool kernel) {
    Out o;
    split_key::SplitKeyLaunch launch{};
    launch.tiers = static_cast<int>(tiers.size());
    for (size_t m = 0; m < tiers.size(); ++m) {
      const int rows = static_cast<int>(tiers[m].q_rows.size());
      o.out.emplace_back(size_t(rows) * heads * dim);
      o.lse.emplace_back(size_t(rows) * heads);
      split_key::SplitKeyArgs& a = launch.tier[m];
      a = {rows, heads, kv_heads, dim, 1.0f / std::sqrt(static_cast<float>(dim)), softcap, q.data(), int64_t(heads) * dim, dim,
           tiers[m].q_rows.data(), tiers[m].cu_q.data(), tiers[m].cu_k.data(), static_cast<int>(key_counts.size()), tiers[m].max_rows,
           masks[m].first, masks[m].second, tiers[m].k_rows.data(), k_store.data(), v_store.data(), bf16, o.out[m].data(), o.lse[m].data()};
    }
    if (kernel) {
      const auto shape = cuda::split_key_shape<T>(launch);
      auto body = shape.pieces == 1 ? cuda::split_key_kernel<T, 1> : shape.pieces == 2 ? cuda::split_key_kernel<T, 2> : cuda::split_key_kernel<T, 4>;
      emulation::run_grid(body, launch, shape.grid, shape.block, shape.shared_bytes);
    } else {
      for (int m = 0; m < launch.tiers; ++m) {
        const auto& a = launch.tier[m];
        for (int seq = 0; seq < a.sequences; ++seq)
          for (int row = a.cu_q[seq]; row < a.cu_q[seq + 1]; ++row)
            for (int head = 0; head < heads; ++head) split_key::attend_row<T>(a, seq, row, head);
      }
    }
    return o;
  };
  const Out k = run_one(true), h = run_one(false);
  int64_t compared = 0, differ = 0;
  for (size_t m = 0; m < tiers.size(); ++m) {
    compared += static_cast<int64_t>(k.out[m].size() + k.lse[m].size());
    differ += differing(k.out[m], h.out[m]) + differing(k.lse[m], h.lse[m]);
  }
  report(std::string("split_key ") + (bf16 ? "bf16" : "fp32") + " dim=" + std::to_string(dim) + (softcap > 0 ? " soft-capped" : "") +
             (masks.size() == 1 ? " one tier of " + std::to_string(key_counts.back()) + " keys" : ""),
         "tiers together", compared, differ);
}

// The few-row GEMM's body in one tiling, launched as its launch does (with_tiling): its cp.async pipeline (stages past
// its slots reused), its blocks over the rows and columns, its fragments and its stores, against the same products
// summed by the emulation's model of the tensor cores (host_emulation.h, mma_k16_model), K 16 at a time in order. x's
// rows are followed by NaNs (a row past the last read would turn up), y by a guard no store may touch.
void few_rows_mma_case(int tiling, int rows, int k, int n) {
  const auto x = bf16s(randoms(size_t(rows) * k)), w = bf16s(randoms(size_t(n) * k, 0.05f));
  std::vector<uint16_t> x_guarded(x);
  x_guarded.resize(x.size() + size_t(32) * k, 0x7fc0);  // a block's rows are at most 32
  constexpr size_t kGuard = 64;
  std::vector<uint16_t> y(size_t(rows) * n + kGuard, 0xabcd);
  const few_rows_mma::Args a{x_guarded.data(), w.data(), y.data(), rows, k, n};
  if (!few_rows_mma::fits(a, few_rows_mma::kTilings[tiling])) throw std::logic_error("few_rows_mma_case: a shape the tiling does not take");
  cuda::with_tiling(tiling, a, [&](auto kernel, dim3 grid, dim3 block, size_t shared) { emulation::run_grid(kernel, a, grid, block, shared); });
  std::vector<uint16_t> want(y.size(), 0xabcd);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < n; ++c) {
      float acc = 0.0f, a16[16], b16[16];
      for (int k0 = 0; k0 < k; k0 += 16) {
        for (int i = 0; i < 16; ++i) a16[i] = exact::widen(x[size_t(r) * k + k0 + i]), b16[i] = exact::widen(w[size_t(c) * k + k0 + i]);
        acc = emulation::mma_k16_model(acc, a16, b16);
      }
      want[size_t(r) * n + c] = exact::narrow_bf16(acc);
    }
  const auto t = few_rows_mma::kTilings[tiling];
  report("few_rows_mma " + std::to_string(few_rows_mma::block_rows(t)) + "x" + std::to_string(few_rows_mma::block_cols(t)) + " rows=" + std::to_string(rows) +
             " k=" + std::to_string(k) + " n=" + std::to_string(n),
         "pipeline",
         static_cast<int64_t>(y.size()), differing(y, want));
}

// A kernel one of whose threads leaves before the block's barrier: on a GPU, undefined; the emulation must stop it.
struct LeavesEarly {
  unsigned leaver;
};
__global__ void leaves_before_barrier_kernel(LeavesEarly a) {
  if (threadIdx.x == a.leaver) return;
  __syncthreads();
}

// Loads (by __ldg or cp.async) or stores 16 bytes at `at` floats past a 16-aligned buffer: aligned only where `at` is a
// multiple of 4.
struct MovesVector {
  float* base;
  int at;
  enum How { kLoad, kCpAsync, kStore } how;
};
__global__ void moves_vector_kernel(MovesVector a) {
  alignas(16) static unsigned char to[16];
  if (a.how == MovesVector::kCpAsync) emulation::copy_16_async(to, a.base + a.at, 16);
  else if (a.how == MovesVector::kStore) cuda::store_vector(a.base + a.at, float4{});
  else (void)__ldg(reinterpret_cast<const float4*>(a.base + a.at));
}

// Reads its first dynamic shared float and a __shared__ one without writing them (then writes the __shared__ one, for
// the next block to find), and writes a byte `past` bytes beyond its `bytes`.
struct TouchesShared {
  float *read, *read_static;
  size_t bytes, past;
};
__global__ void touches_shared_kernel(TouchesShared a) {
  unsigned char* shared = cuda::dynamic_shared<unsigned char>();
  __shared__ float kept;
  cuda::block_shared(kept);
  if (threadIdx.x == 0) *a.read = *reinterpret_cast<float*>(shared), *a.read_static = kept, kept = 1.0f;
  if (a.past > 0 && threadIdx.x == 0) shared[a.bytes + a.past - 1] = 1;
}

// Copies 16 bytes into shared memory by cp.async and reads its first float before the wait and after it.
struct CopiesAhead {
  const float* from;
  float *before, *after;
};
__global__ void copies_ahead_kernel(CopiesAhead a) {
  float* stage = cuda::dynamic_shared<float>();
  emulation::copy_16_async(stage, a.from, 16);
  emulation::commit_copies();
  *a.before = stage[0];
  emulation::wait_copies(0);
  *a.after = stage[0];
}

// Reads the float just past a buffer of `n`: on a GPU a fault, or another buffer's data.
struct ReadsPastEnd {
  const float* buffer;
  int n;
  float* read;
};
// What it reads is kept: a read whose value goes unused is dropped by the optimizer, and AddressSanitizer sees nothing.
__global__ void reads_past_end_kernel(ReadsPastEnd a) {
  if (threadIdx.x == 0) *a.read = __ldg(a.buffer + a.n);
}

// Block (x, y) notes its place in the order the blocks ran.
struct NotesOrder {
  std::vector<unsigned>* order;
};
__global__ void notes_order_kernel(NotesOrder a) {
  if (threadIdx.x == 0) a.order->push_back(blockIdx.y * gridDim.x + blockIdx.x);
}

// Each thread notes its index before and after a barrier, in the order the threads ran.
__global__ void notes_turns_kernel(NotesOrder a) {
  a.order->push_back(threadIdx.x);
  __syncthreads();
  a.order->push_back(threadIdx.x);
}

void print_order(const char* name, const std::vector<unsigned>& order) {
  std::printf("{\"%s\":[", name);
  for (size_t i = 0; i < order.size(); ++i) std::printf("%s%u", i ? "," : "", order[i]);
  std::printf("]}\n");
}

// A 16-byte access aligned, then 4 bytes past an aligned address, which faults on a GPU: stopped.
void misaligned(MovesVector::How how) {
  alignas(16) static float buffer[8] = {};
  emulation::run_grid(moves_vector_kernel, MovesVector{buffer, 4, how}, dim3(1), dim3(32), 0);
  emulation::run_grid(moves_vector_kernel, MovesVector{buffer, 1, how}, dim3(1), dim3(32), 0);
}

// The emulation's probes, each a launch that shows one of its behaviours (`cuda_bodies_check NAME`,
// test/kernels/gpu-forward.test.ts). Those that stop the emulation (an abort, with its message) say so.
const std::map<std::string, std::function<void()>> kProbes = {
    // A thread that leaves before a barrier the others wait at: stopped, rather than waiting for ever.
    {"barrier-never-reached", [] { emulation::run_grid(leaves_before_barrier_kernel, LeavesEarly{5}, dim3(1), dim3(64), 0); }},
    // The order a 3 x 2 grid's blocks run in (last first), and a block's 4 threads around a barrier (lowest first,
    // then highest first).
    {"run-order",
     [] {
       std::vector<unsigned> blocks, threads;
       emulation::run_grid(notes_order_kernel, NotesOrder{&blocks}, dim3(3, 2), dim3(32), 0);
       emulation::run_grid(notes_turns_kernel, NotesOrder{&threads}, dim3(1), dim3(4), 0);
       print_order("blocks", blocks);
       print_order("threads", threads);
     }},
    // A body reading past its buffer: what AddressSanitizer reports, in the check compiled with it.
    {"read-past-end",
     [] {
       const std::vector<float> buffer(8);
       float read = 0;
       emulation::run_grid(reads_past_end_kernel, ReadsPastEnd{buffer.data(), 8, &read}, dim3(1), dim3(32), 0);
       std::printf("{\"read\":%g}\n", read);
     }},
    // What a body reads of dynamic shared memory and of a __shared__ variable it never wrote (a GPU's hold whatever was
    // there; the second block's, not what the first left), then a write one byte past the launch's bytes: stopped.
    {"shared-memory",
     [] {
       float read = 0, read_static = 0;
       emulation::run_grid(touches_shared_kernel, TouchesShared{&read, &read_static, 64, 0}, dim3(2), dim3(32), 64);
       std::fprintf(stderr, "unwritten shared memory read as %s, a __shared__ variable as %s\n", std::isnan(read) ? "NaN" : "a number",
                    std::isnan(read_static) ? "NaN" : "a number");
       emulation::run_grid(touches_shared_kernel, TouchesShared{&read, &read_static, 64, 1}, dim3(1), dim3(32), 64);
     }},
    // What a stage of cp.async holds before the copy's wait (the poison: the copy has not landed) and after it.
    {"cp-async-lands-at-wait",
     [] {
       alignas(16) static const float from[4] = {1.5f, 0, 0, 0};
       float before = 0, after = 0;
       emulation::run_grid(copies_ahead_kernel, CopiesAhead{from, &before, &after}, dim3(1), dim3(1), 16);
       std::printf("{\"before\":\"%s\",\"after\":%g}\n", std::isnan(before) ? "NaN" : "a number", after);
     }},
    {"misaligned-load", [] { misaligned(MovesVector::kLoad); }},
    {"misaligned-cp-async", [] { misaligned(MovesVector::kCpAsync); }},
    {"misaligned-store", [] { misaligned(MovesVector::kStore); }},
};

}  // namespace

// Built under AddressSanitizer (CMakeLists.txt), which reads these before main. Each run starts libtorch, whose
// thousands of start-up allocations the defaults track at length (bench/README.md, "Set-up and suite time"): no
// allocation's stack kept (a report still names the access and its place), a small quarantine of freed blocks, and no
// leak check at exit.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "malloc_context_size=0:quarantine_size_mb=8:detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  if (argc > 1) {
    const auto probe = kProbes.find(argv[1]);
    if (probe == kProbes.end()) return std::fprintf(stderr, "cuda_bodies_check: no probe %s\n", argv[1]), 2;
    probe->second();
    return 0;
  }
  // Each tiling: one stage; a tile of rows partly used; thirteen stages, past every tiling's slots (reused), over
  // blocks of rows (40: the last partly used); many blocks (100 rows). The first tiling also: two stages, under its
  // depth; seven, past it; six, its depth, both tiles of rows whole.
  for (int tiling = 0; tiling < few_rows_mma::kTilingCount; ++tiling) {
    few_rows_mma_case(tiling, 1, 64, 16);
    few_rows_mma_case(tiling, 24, 512, 32);
    few_rows_mma_case(tiling, 40, 832, 16);
    few_rows_mma_case(tiling, 100, 128, 32);
  }
  few_rows_mma_case(0, 7, 128, 32);
  few_rows_mma_case(0, 16, 448, 48);
  few_rows_mma_case(0, 32, 384, 16);
  for (int n : {37, 1024})
    for (bool addend_bf16 : {false, true})
      for (bool out_bf16 : {false, true}) add_rms_norm(n, addend_bf16, out_bf16);
  // 2,500: a block of 320 threads, some of whose last elements lie past the row; 9,000: 1,024 threads, a thread's
  // elements in two passes of kRowAhead, the second short.
  add_rms_norm(2500, true, true);
  add_rms_norm(9000, false, true, /*with_addend=*/false);
  qk_norm_rope(true, 128, true, true);
  qk_norm_rope(true, 128, false, true);
  qk_norm_rope(true, 128, true, false);
  qk_norm_rope(true, 128, true, true, 28, 4);
  qk_norm_rope(false, 64, true, true);
  qk_norm_rope(true, 64, true, true);
  for (bool gelu : {false, true}) {
    gated_mul(true, 3072, gelu);
    gated_mul(true, 40, gelu);
    gated_mul(false, 37, gelu);
  }
  for (bool bf16 : {false, true}) {
    for (bool in_place : {false, true}) attention_merge(bf16, in_place);
    attention_merge(bf16, /*in_place=*/true, /*listed=*/true);
  }
  for (bool bf16 : {false, true})
    for (float softcap : {0.0f, 30.0f}) label_readout(bf16, softcap);
  // Head dim 128 (two 16-byte pieces a thread: two tiles in registers at once), and a tier of five tiles, past every
  // tile fetched ahead; 256 (four pieces: one tile in registers) on three.
  split_key_case<uint16_t>(128, 30.0f);
  split_key_case<uint16_t>(128, 0.0f, {130}, {{false, -1}});
  split_key_case<uint16_t>(256, 0.0f, {70}, {{false, -1}});
  return 0;
}
