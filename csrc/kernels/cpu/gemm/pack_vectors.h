// Vector steps of the bf16 panels' packing (gemm_fma.cpp, gemm_dpbf16.cpp). Both families hold a column's values
// in pairs of k, 32-bit words with w[2s] in the low half and w[2s + 1] in the high one. For a PackSource's rows:
//   - along k (a linear's weights, attention's keys): a panel's words are a transpose of its columns' rows, L rows
//     of L words at a time (words_of_rows);
//   - along n (attention's values): a step's words join two rows' runs of columns (pair_runs).
// GCC vector types, as FmaTile's: the same source becomes zmm, ymm or xmm code in the target function it is
// inlined into (a `flatten` one; its file ignores -Wpsabi). The scalar loops beside them stay each family's
// reference (Kernel::plain_pack), compared byte for byte by test/native/gemm_check.cpp.
#pragma once
#include <cstdint>
#include <cstring>

namespace tq::gemm::pack_vectors {

template <int L>
struct Words {
  typedef uint32_t V __attribute__((vector_size(4 * L)));
  typedef int32_t Index __attribute__((vector_size(4 * L)));
};

// The lower (high = false) or upper halves of a and b, lane by lane in turn: a0 b0 a1 b1 ...
template <int L>
inline typename Words<L>::V interleave(typename Words<L>::V a, typename Words<L>::V b, bool high) {
  typename Words<L>::Index index;
  for (int i = 0; i < L; ++i) index[i] = (high ? L / 2 : 0) + i / 2 + (i % 2) * L;
  return __builtin_shuffle(a, b, index);
}

// v[i] lane c = row c's word of step first_step + i, for rows[0 .. L), each k values long: the missing high half of
// an odd k's last step and the steps past k are zero, and no row is read past its end. log2(L) rounds of a perfect
// shuffle transpose (each round interleaves row i with row i + L/2 into rows 2i and 2i + 1).
template <int L>
inline void words_of_rows(const uint16_t* const* rows, int64_t first_step, int64_t k, typename Words<L>::V (&v)[L]) {
  using V = typename Words<L>::V;
  const int64_t from = 2 * first_step, left = k - from;
  for (int c = 0; c < L; ++c) {
    if (left >= 2 * L) {
      std::memcpy(&v[c], rows[c] + from, sizeof(V));
    } else {
      uint16_t tail[2 * L] = {};
      std::memcpy(tail, rows[c] + from, static_cast<size_t>(left) * sizeof(uint16_t));
      std::memcpy(&v[c], tail, sizeof(V));
    }
  }
  for (int round = 1; round < L; round *= 2) {
    V next[L];
    for (int i = 0; i < L / 2; ++i) {
      next[2 * i] = interleave<L>(v[i], v[i + L / 2], false);
      next[2 * i + 1] = interleave<L>(v[i], v[i + L / 2], true);
    }
    for (int i = 0; i < L; ++i) v[i] = next[i];
  }
}

// L words from runs of L columns: low[c] | high[c] << 16, high null for zeros (past an odd k).
template <int L>
inline typename Words<L>::V pair_runs(const uint16_t* low, const uint16_t* high) {
  typedef uint16_t Half __attribute__((vector_size(2 * L)));
  using V = typename Words<L>::V;
  Half l, h = Half{};
  std::memcpy(&l, low, sizeof l);
  if (high) std::memcpy(&h, high, sizeof h);
  return __builtin_convertvector(l, V) | __builtin_convertvector(h, V) << 16;
}

}  // namespace tq::gemm::pack_vectors
