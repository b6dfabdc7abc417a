// A cascade tier (batch/cascade_plan.h: the state tier, the questions' own)
// read in place: each query row over the keys of its sequence it sees, where
// they lie in the KV cache's store, through the tier's key slots, with no copy
// of them first. One
// definition of the arithmetic for the CUDA kernel (kernels/cuda/split_key_attention.cu)
// and its host twin (attend_row below), every operation rounded on its own, so
// that the two give the same bits and the host's checks speak for the kernel.
//
// For one (row, head), over the keys [first, last] of its sequence it sees (all of them in an unmasked tier; in a
// causal or windowed one, FlashAttention-2's bottom-right mask: cascade_plan.h's visible_keys), in the sequence's
// tiles of kTileKeys from its first key, each tile that holds one of them in order:
//   s_j    = scale * sum_d q_d k_jd            the sum by fused multiply-adds, d = 0, 1, ...
//                                              (then soft-capped where the model caps scores); a key the row
//                                              does not see: s_j = -inf, so p_j = 0
//   m'     = max(m, max_j s_j)                 the running maximum (exact)
//   alpha  = exp(m - m')                       0 on the first tile
//   p_j    = exp(s_j - m')
//   l      = l alpha + (p_0 + p_1 + ...)        the tile's sum from its first key
//   acc_d  = acc_d alpha, then acc_d = p_j v_jd + acc_d for j = 0, 1, ... (fused)
// and at the end out_d = acc_d / l, lse = m + log l (natural log of the sum of
// exp(s_j)), which the merge (attention_merge_math.h) needs. A row's arithmetic
// depends on its q and its sequence's keys alone, never on the other rows of
// the tier: the same bits in any batch. exp and log are written here from
// fused multiply-adds (the device's and libm's differ in their last bits).
#pragma once
#include <cstdint>

#include "kernels/math/host_device_math.h"

namespace tq::split_key {

constexpr int kTileKeys = 32;  // a warp's lanes: one key each for the scores
constexpr int kMaxDim = 256;   // head dims up to this; a lane holds kMaxDim / 32 of the output
constexpr int kBlockWarps = 8;  // the kernel's items a block (block_item)

// Torch-free, as the launch and the host twin read it.
struct SplitKeyArgs {
  int rows, heads, kv_heads, dim;
  float scale;
  float softcap;                  // > 0: scores soft-capped, softcap * tanh(s / softcap), before the softmax (Gemma)
  const void* q;                  // the step's queries, [.., heads, dim]: element (r, h, d) at r * q_row_stride + h * q_head_stride + d
  int64_t q_row_stride, q_head_stride;
  const int64_t* q_rows;          // [rows]: each tier row's query row
  const int32_t* cu_q;            // [sequences + 1]: each sequence's rows (tier rows)
  const int32_t* cu_k;            // [sequences + 1]: each sequence's keys in k_rows
  int sequences, max_rows;        // the tier's sequences, and the most rows of one (the launch's grid)
  bool causal;                    // the tier's mask, as cascade_plan.h's CascadeTier: row i of nq over nk keys is aligned
  int window_left;                //   with key a = i + nk - nq, sees keys up to it if causal, from a - window_left if >= 0
  const int64_t* k_rows;          // the keys' slots in the store
  const void* k_store;            // [slots, kv_heads, dim] contiguous
  const void* v_store;
  bool bf16;                      // q, the stores and out in bf16 (bits), else fp32
  void* out;                      // [rows, heads, dim] contiguous
  float* lse;                     // [heads, rows]
};

// One launch's tiers (a step's split-key tiers of a layer: a warm question's own and its state's, side by side in one
// grid); more are launched in turns.
constexpr int kLaunchTiers = 4;
struct SplitKeyLaunch {
  SplitKeyArgs tier[kLaunchTiers];
  int tiers;
};

}  // namespace tq::split_key

namespace tq::exact {

TQ_HOST_DEVICE inline float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);  // correctly rounded, as IEEE 754 asks of it: hardware or not
#endif
}

// e^x for x <= 0 (any x <= -87, -inf included, gives 0): 2^n e^r with n the nearest integer to x / ln 2 and
// |r| <= ln 2 / 2, r in two parts (Cody and Waite), e^r by its Taylor series to r^7 (relative error below 6e-9
// before rounding). 2^n is a normal float for every x kept, so the last product is exact.
TQ_HOST_DEVICE inline float exp_nonpositive(float x) {
  if (!(x > -87.0f)) return x != x ? x : 0.0f;
  const float n = rintf(mul(x, 1.44269504088896341f));
  float r = fma(-n, 0.693145751953125f, x);  // ln 2's first 16 bits: n times it is exact
  r = fma(-n, 1.42860682030941723e-6f, r);
  const float taylor[] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
  float p = 1.0f / 5040.0f;
  for (float c : taylor) p = fma(p, r, c);
  return mul(p, from_bits(static_cast<uint32_t>(static_cast<int>(n) + 127) << 23));
}

// ln x for a positive normal x: e ln 2 + ln m with x = 2^e m, m in [sqrt(1/2), sqrt(2)), and ln m = 2 atanh(s),
// s = (m - 1) / (m + 1), |s| <= 0.172, by its series to s^9 (the next term below 1e-9).
TQ_HOST_DEVICE inline float log_positive(float x) {
  const uint32_t bits = to_bits(x);
  int e = static_cast<int>(bits >> 23) - 127;
  float m = from_bits((bits & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = mul(m, 0.5f);
    ++e;
  }
  const float s = div(add(m, -1.0f), add(m, 1.0f)), s2 = mul(s, s);
  const float series[] = {2.0f / 7.0f, 2.0f / 5.0f, 2.0f / 3.0f, 2.0f};
  float p = 2.0f / 9.0f;
  for (float c : series) p = fma(p, s2, c);
  return fma(static_cast<float>(e), 0.693147180559945309f, mul(p, s));
}

// tanh x = (1 - e) / (1 + e), e = e^-2|x|, signed as x.
TQ_HOST_DEVICE inline float tanh(float x) {
  const float e = exp_nonpositive(mul(-2.0f, fabsf(x)));
  const float t = div(add(1.0f, -e), add(1.0f, e));
  return x < 0.0f ? -t : t;
}

}  // namespace tq::exact

namespace tq::split_key {

// Element i of a row of T (fp32, or bf16 bits) as fp32.
template <typename T>
TQ_HOST_DEVICE inline float element(const T* row, int i) {
  return exact::widen(row[i]);
}

// A key's or value's row for head `kv_head` in a [slots, kv_heads, dim] store.
template <typename T>
TQ_HOST_DEVICE inline const T* store_row(const SplitKeyArgs& a, const void* store, int64_t slot, int kv_head) {
  return static_cast<const T*>(store) + (slot * a.kv_heads + kv_head) * a.dim;
}

// A score from its dot product q . k: scaled, and soft-capped where asked.
TQ_HOST_DEVICE inline float scaled_score(const SplitKeyArgs& a, float dot) {
  const float s = exact::mul(dot, a.scale);
  return a.softcap > 0.0f ? exact::mul(a.softcap, exact::tanh(exact::div(s, a.softcap))) : s;
}

// s = scale * q . k, the sum in order of d by fused multiply-adds, soft-capped where asked; q already in fp32.
template <typename T>
TQ_HOST_DEVICE inline float score(const SplitKeyArgs& a, const float* q, const T* k) {
  float acc = 0.0f;
  for (int d = 0; d < a.dim; ++d) acc = exact::fma(q[d], element(k, d), acc);
  return scaled_score(a, acc);
}

// The kernel's loads (from its tiles in shared memory), widened where the rows allow; the same multiply-adds in the
// same order as score() and attend_row's, so the same bits: the host checks the two forms agree.
TQ_HOST_DEVICE inline void load_words(const uint16_t* p, uint32_t (&words)[4]) {  // 8 bf16, 16-byte aligned
#if defined(__CUDA_ARCH__)
  const uint4 packed = *reinterpret_cast<const uint4*>(p);
  words[0] = packed.x, words[1] = packed.y, words[2] = packed.z, words[3] = packed.w;
#else
  std::memcpy(words, p, sizeof words);
#endif
}
// A word's two bf16 elements: the first in its low half (little-endian), the second in its high half.
TQ_HOST_DEVICE inline float low_half(uint32_t word) { return exact::from_bits(word << 16); }
TQ_HOST_DEVICE inline float high_half(uint32_t word) { return exact::from_bits(word & 0xffff0000u); }

// score(), a bf16 key read eight elements to a load where its rows are a multiple of 8 elements (16-byte aligned in
// the kernel's tiles).
template <typename T>
TQ_HOST_DEVICE inline float wide_score(const SplitKeyArgs& a, const float* q, const T* k) {
  if constexpr (sizeof(T) == 2) {
    if (a.dim % 8 == 0) {
      float acc = 0.0f;
      // A loop of fixed length (guarded by dim): the kernel issues its loads from the tile ahead of the multiply-adds.
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int d = 0; d < kMaxDim; d += 8) {
        if (d >= a.dim) break;
        uint32_t words[4];
        load_words(k + d, words);
        for (int i = 0; i < 4; ++i) {
          acc = exact::fma(q[d + 2 * i], low_half(words[i]), acc);
          acc = exact::fma(q[d + 2 * i + 1], high_half(words[i]), acc);
        }
      }
      return scaled_score(a, acc);
    }
  }
  return score(a, q, k);
}

// acc[i] = p v[first + i] + acc[i] for i < count (a lane's slice of a value row, at most kPerLane elements), in order
// of i; bf16 two elements to a load where every slice is whole and even (dim a multiple of 64).
template <int kPerLane, typename T>
TQ_HOST_DEVICE inline void add_weighted(float* acc, float p, const T* v, int first, int count, int dim) {
  if constexpr (sizeof(T) == 2) {
    if (dim % 64 == 0) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int i = 0; i < kPerLane; i += 2) {
        if (i >= count) break;
        const uint32_t word = exact::load_word(v + first + i);
        acc[i] = exact::fma(p, low_half(word), acc[i]);
        acc[i + 1] = exact::fma(p, high_half(word), acc[i + 1]);
      }
      return;
    }
  }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 0; i < kPerLane; ++i)
    if (i < count && first + i < dim) acc[i] = exact::fma(p, element(v, first + i), acc[i]);
}

// exp(m - m') for the running maximum m before a tile and m' after it: 0 before the first.
TQ_HOST_DEVICE inline float rescale(float before, float after) {
  return before == -INFINITY ? 0.0f : exact::exp_nonpositive(exact::add(before, -after));
}

TQ_HOST_DEVICE inline float weight(float score, float top) { return exact::exp_nonpositive(exact::add(score, -top)); }

TQ_HOST_DEVICE inline float log_sum_exp(float top, float sum) { return exact::add(top, exact::log_positive(sum)); }

// The keys [first, last] of its sequence that tier row `row` of sequence `seq` sees (cascade_plan.h's visible_keys);
// first > last where it sees none.
struct KeyRange {
  int first, last;
};
TQ_HOST_DEVICE inline KeyRange row_keys(const SplitKeyArgs& a, int seq, int row) {
  const int nq = a.cu_q[seq + 1] - a.cu_q[seq], nk = a.cu_k[seq + 1] - a.cu_k[seq];
  const int aligned = row - a.cu_q[seq] + nk - nq;
  const int last = a.causal ? (aligned < nk - 1 ? aligned : nk - 1) : nk - 1;
  const int first = a.window_left < 0 ? 0 : (aligned - a.window_left > 0 ? aligned - a.window_left : 0);
  return {first, last};
}

// The first key of the tile that holds key `key`: tiles start at the sequence's first key, whatever the row sees.
TQ_HOST_DEVICE inline int tile_of(int key) { return key / kTileKeys * kTileKeys; }

// The kernel's work: a block per (sequence, key head, group of `warps` items), an item being one of the sequence's
// rows with one of the query heads that share the key head, a warp per item. What the block's warp `warp` takes
// (inactive past the sequence's items); the host checks that the grid covers every (tier row, head) once.
struct Item {
  int row, head;
  bool active;
};
TQ_HOST_DEVICE inline int item_groups(const SplitKeyArgs& a, int warps) {
  return static_cast<int>((static_cast<int64_t>(a.max_rows) * (a.heads / a.kv_heads) + warps - 1) / warps);
}
TQ_HOST_DEVICE inline Item block_item(const SplitKeyArgs& a, int seq, int kv_head, int item_group, int warp, int warps) {
  const int group = a.heads / a.kv_heads, first_row = a.cu_q[seq], items = (a.cu_q[seq + 1] - first_row) * group;
  const int item = item_group * warps + warp;
  return {first_row + item / group, kv_head * group + item % group, item < items};
}

// The keys the block's items see, together: from the first item's first to the last item's last (a row's range only
// grows with the row, and a block's items are consecutive rows).
TQ_HOST_DEVICE inline KeyRange block_keys(const SplitKeyArgs& a, int seq, int kv_head, int item_group, int warps) {
  int last_warp = 0;
  while (last_warp + 1 < warps && block_item(a, seq, kv_head, item_group, last_warp + 1, warps).active) ++last_warp;
  return {row_keys(a, seq, block_item(a, seq, kv_head, item_group, 0, warps).row).first,
          row_keys(a, seq, block_item(a, seq, kv_head, item_group, last_warp, warps).row).last};
}

// The host twin of the kernel: tier row `row` of sequence `seq`, head `head`, written to out and lse as the kernel
// writes them.
template <typename T>
inline void attend_row(const SplitKeyArgs& a, int seq, int row, int head) {
  const T* q = static_cast<const T*>(a.q) + a.q_rows[row] * a.q_row_stride + head * a.q_head_stride;
  float qf[kMaxDim], acc[kMaxDim] = {}, s[kTileKeys];
  for (int d = 0; d < a.dim; ++d) qf[d] = element(q, d);
  const int first = a.cu_k[seq], n = a.cu_k[seq + 1] - first, kv_head = head / (a.heads / a.kv_heads);
  const KeyRange seen = row_keys(a, seq, row);
  float top = -INFINITY, sum = 0.0f;
  for (int t = tile_of(seen.first); t <= seen.last; t += kTileKeys) {
    const int count = n - t < kTileKeys ? n - t : kTileKeys;
    float tile_top = -INFINITY;
    for (int j = 0; j < count; ++j) {
      const bool sees = t + j >= seen.first && t + j <= seen.last;
      s[j] = sees ? score(a, qf, store_row<T>(a, a.k_store, a.k_rows[first + t + j], kv_head)) : -INFINITY;
      tile_top = fmaxf(tile_top, s[j]);
    }
    const float next = fmaxf(top, tile_top), alpha = rescale(top, next);
    for (int d = 0; d < a.dim; ++d) acc[d] = exact::mul(acc[d], alpha);
    float tile_sum = 0.0f;
    for (int j = 0; j < count; ++j) {
      const float p = weight(s[j], next);
      const T* v = store_row<T>(a, a.v_store, a.k_rows[first + t + j], kv_head);
      tile_sum = exact::add(tile_sum, p);
      for (int d = 0; d < a.dim; ++d) acc[d] = exact::fma(p, element(v, d), acc[d]);
    }
    sum = exact::add(exact::mul(sum, alpha), tile_sum);
    top = next;
  }
  T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.heads + head) * a.dim;
  const bool any = seen.last >= seen.first;
  for (int d = 0; d < a.dim; ++d) exact::store(any ? exact::div(acc[d], sum) : 0.0f, out + d);
  a.lse[static_cast<int64_t>(head) * a.rows + row] = any ? log_sum_exp(top, sum) : -INFINITY;
}

}  // namespace tq::split_key
