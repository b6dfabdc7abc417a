// The tile operations the AMX GEMMs (gemm_amx.cpp: int8; gemm_amx_bf16.cpp:
// bf16) are written against, with two implementations: the hardware's (Intel
// AMX: 8 tile registers of up to 16 rows x 64 bytes, TDPBUSD, TDPBF16PS), and
// a plain model of it that runs on any CPU, so that the kernels' tiling,
// packing, edges and threads are tested everywhere (test/native/int8_check.cpp,
// gemm_check.cpp). An integer dot product has one exact result, so the
// model's int8 bits are the hardware's; its bf16 bits are its own (dpbf16ps).
//
// Every tile here is configured whole: 16 rows of 64 bytes (A: 16 rows x 64 u8
// activations, 16 steps of 4 k; B: 16 steps x 16 columns x 4 s8 weights; C: 16
// rows x 16 int32 sums; bf16: A 16 rows x 16 pairs, B 16 pairs x 16 columns
// x 2, C 16 x 16 fp32). A kernel passes tile numbers as template arguments:
// the instructions take them as immediates.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tq::amx {

constexpr int kTileRows = 16, kTileBytes = 64;

// The model: tile registers in thread-local memory, each operation as the
// manual defines it.
struct ModelTiles {
  struct Registers {
    alignas(64) unsigned char t[8][kTileRows][kTileBytes];
  };
  static Registers& regs() {
    thread_local Registers r;
    return r;
  }
  static void configure() {}
  static void release() {}
  template <int T>
  static void zero() {
    std::memset(regs().t[T], 0, sizeof regs().t[T]);
  }
  template <int T>
  static void load(const void* base, int64_t stride) {
    for (int r = 0; r < kTileRows; ++r) std::memcpy(regs().t[T][r], static_cast<const char*>(base) + r * stride, kTileBytes);
  }
  template <int T>
  static void store(void* base, int64_t stride) {
    for (int r = 0; r < kTileRows; ++r) std::memcpy(static_cast<char*>(base) + r * stride, regs().t[T][r], kTileBytes);
  }
  // TDPBF16PS as the single-pair rule measured on a Xeon: for each pair s in order, C[m][n] = RNE(C[m][n] +
  // RNE(A[m][2s] B[s][2n] + A[m][2s+1] B[s][2n+1])), bf16 inputs and fp32 results below 2^-126 taken as 0. It
  // matched the instruction for one pair only: over longer chains the hardware rounds in a way no sequence
  // tried reproduced. So the model's bf16 bits are its own; the tests ask of it what they ask of
  // the hardware: accuracy against float64, and the same bits in any batch.
  template <int C, int A, int B>
  static void dpbf16ps() {
    auto& t = regs().t;
    // The tiles' bf16 values widened once (A: row m, element e; B: pair s, column n, member i), below 2^-126 as 0.
    float a[kTileRows][2 * kTileRows], b[kTileRows][kTileBytes / 4][2];
    for (int r = 0; r < kTileRows; ++r)
      for (int e = 0; e < 2 * kTileRows; ++e) {
        a[r][e] = widened(&t[A][r][2 * e]);
        b[r][e / 2][e % 2] = widened(&t[B][r][2 * e]);
      }
    for (int m = 0; m < kTileRows; ++m)
      for (int n = 0; n < kTileBytes / 4; ++n) {
        float acc;
        std::memcpy(&acc, &t[C][m][4 * n], 4);
        for (int s = 0; s < kTileRows; ++s) {
          const double pair = static_cast<double>(a[m][2 * s]) * b[s][n][0] + static_cast<double>(a[m][2 * s + 1]) * b[s][n][1];
          acc = flushed(acc + flushed(static_cast<float>(pair)));
        }
        std::memcpy(&t[C][m][4 * n], &acc, 4);
      }
  }
  static float flushed(float v) { return std::fabs(v) < 0x1p-126f ? 0.0f * v : v; }
  static float widened(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return flushed(f);
  }
  // TDPBUSD: C[m][n] += sum over steps s and bytes i of A[m][4s + i] (u8) * B[s][4n + i] (s8), in int32.
  template <int C, int A, int B>
  static void dpbusd() {
    auto& t = regs().t;
    for (int m = 0; m < kTileRows; ++m)
      for (int n = 0; n < kTileBytes / 4; ++n) {
        int32_t acc;
        std::memcpy(&acc, &t[C][m][4 * n], 4);
        for (int s = 0; s < kTileRows; ++s)
          for (int i = 0; i < 4; ++i) acc += static_cast<int32_t>(t[A][m][4 * s + i]) * static_cast<int8_t>(t[B][s][4 * n + i]);
        std::memcpy(&t[C][m][4 * n], &acc, 4);
      }
  }
};

// Loads tile T from 16 rows `stride` bytes apart: in place when the rows are whole, else the first `rows`
// rows' first `bytes` bytes from a zeroed copy (a tile load reads 16 whole rows, which may run past the data;
// the zeros add nothing to a dot product).
template <class Tiles, int T>
inline void load_padded(const void* first, int64_t stride, int64_t rows, int64_t bytes) {
  if (rows == kTileRows && bytes == kTileBytes) return Tiles::template load<T>(first, stride);
  alignas(64) unsigned char copy[kTileRows][kTileBytes] = {};
  for (int64_t r = 0; r < rows; ++r) std::memcpy(copy[r], static_cast<const char*>(first) + r * stride, bytes);
  Tiles::template load<T>(copy, kTileBytes);
}

// The bf16 kernel's dot product of one 16-column group (C tile C) over 16 steps from s0: TDPBF16PS.
template <class Tiles, int C>
inline void group_dot(const char* panel, int64_t s0, int64_t steps, int64_t step_bytes) {
  // A B tile's rows: one step of the group's 16 columns (64 bytes), step_bytes apart.
  load_padded<Tiles, 5>(panel + s0 * step_bytes + C * 64, step_bytes, std::min<int64_t>(kTileRows, steps - s0), 64);
  Tiles::template dpbf16ps<C, 4, 5>();
}

// The bf16 kernel's block of 16 rows against one 64-column panel of `steps` steps (step_bytes apart): the four C
// tiles (0-3, one per 16-column group) start from c (16 x 64 four-byte values) and end in it, having added, 16 steps
// at a time, the A tile that load_a(s0) loads (tile 4) times each group's B tile (tile 5). Its k order is fixed by
// the panel alone.
template <class Tiles, class LoadA>
inline void panel_block(void* c, const char* panel, int64_t steps, int64_t step_bytes, LoadA load_a) {
  constexpr int64_t ld = 64 * 4;
  auto* at = static_cast<char*>(c);
  Tiles::template load<0>(at, ld);
  Tiles::template load<1>(at + 64, ld);
  Tiles::template load<2>(at + 128, ld);
  Tiles::template load<3>(at + 192, ld);
  for (int64_t s0 = 0; s0 < steps; s0 += kTileRows) {
    load_a(s0);
    group_dot<Tiles, 0>(panel, s0, steps, step_bytes);
    group_dot<Tiles, 1>(panel, s0, steps, step_bytes);
    group_dot<Tiles, 2>(panel, s0, steps, step_bytes);
    group_dot<Tiles, 3>(panel, s0, steps, step_bytes);
  }
  Tiles::template store<0>(at, ld);
  Tiles::template store<1>(at + 64, ld);
  Tiles::template store<2>(at + 128, ld);
  Tiles::template store<3>(at + 192, ld);
}

}  // namespace tq::amx

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/x86_intrinsics.h"

namespace tq::amx {

// Whether the CPU has AMX tiles and the instructions of `feature_bit` (CPUID leaf 7, EDX: 25 AMX-INT8, 22
// AMX-BF16), and Linux granted this process tile state: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
// asked once, before any tile instruction (without it the first one is SIGILL).
inline bool cpu_has(int feature_bit) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << feature_bit))) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
}
constexpr int kInt8Bit = 25, kBf16Bit = 22;

#define TQ_AMX __attribute__((target("amx-tile,amx-int8,amx-bf16")))

// The hardware: the same operations as instructions. configure() loads the
// tile configuration on the calling thread (every tile 16 x 64 bytes); the
// process must have been granted tile state first (cpu_has_amx_int8).
struct HardwareTiles {
  struct alignas(64) Config {
    unsigned char bytes[64];
  };
  TQ_AMX static void configure() {
    Config config = {};
    config.bytes[0] = 1;  // palette 1
    for (int t = 0; t < 8; ++t) {
      const uint16_t colsb = kTileBytes;
      std::memcpy(config.bytes + 16 + 2 * t, &colsb, 2);
      config.bytes[48 + t] = kTileRows;
    }
    // Not GCC 12's _tile_loadconfig: its asm names only the first 8 bytes as read, so the optimizer dropped the
    // stores of the tiles' shapes as dead, and every tile came up unconfigured (SIGILL at the first tile load,
    // on the first AMX Xeon the kernels ran on). This operand is the whole 64 bytes.
    asm volatile("ldtilecfg %0" ::"m"(config));
  }
  TQ_AMX static void release() { _tile_release(); }
  // GCC's tile intrinsics paste their tile number into the instruction's text: it must be a literal, so each
  // operation spells out the tiles the kernels use (C 0-3; int8: A 4 and 6, B 5 and 7; bf16: A 4, B 5).
#define TQ_TILE_CASES(op) \
  if constexpr (T == 0) op(0);  \
  else if constexpr (T == 1) op(1); \
  else if constexpr (T == 2) op(2); \
  else if constexpr (T == 3) op(3); \
  else if constexpr (T == 4) op(4); \
  else if constexpr (T == 5) op(5); \
  else if constexpr (T == 6) op(6); \
  else op(7)
  template <int T>
  TQ_AMX static void zero() {
    static_assert(T >= 0 && T <= 7, "tiles 0-7");
#define TQ_ZERO(t) _tile_zero(t)
    TQ_TILE_CASES(TQ_ZERO);
#undef TQ_ZERO
  }
  template <int T>
  TQ_AMX static void load(const void* base, int64_t stride) {
    static_assert(T >= 0 && T <= 7, "tiles 0-7");
#define TQ_LOAD(t) _tile_loadd(t, base, stride)
    TQ_TILE_CASES(TQ_LOAD);
#undef TQ_LOAD
  }
  template <int T>
  TQ_AMX static void store(void* base, int64_t stride) {
    static_assert(T >= 0 && T <= 7, "tiles 0-7");
#define TQ_STORE(t) _tile_stored(t, base, stride)
    TQ_TILE_CASES(TQ_STORE);
#undef TQ_STORE
  }
  template <int C, int A, int B>
  TQ_AMX static void dpbusd() {
    static_assert(C >= 0 && C <= 3 && (A == 4 || A == 6) && (B == 5 || B == 7), "C tiles 0-3, A tile 4 or 6, B tile 5 or 7");
    constexpr int T = C;
#define TQ_DPBUSD(t)                                              \
  do {                                                            \
    if constexpr (A == 4 && B == 5) _tile_dpbusd(t, 4, 5);        \
    else if constexpr (A == 4 && B == 7) _tile_dpbusd(t, 4, 7);   \
    else if constexpr (A == 6 && B == 5) _tile_dpbusd(t, 6, 5);   \
    else _tile_dpbusd(t, 6, 7);                                   \
  } while (0)
    TQ_TILE_CASES(TQ_DPBUSD);
#undef TQ_DPBUSD
  }
  template <int C, int A, int B>
  TQ_AMX static void dpbf16ps() {
    static_assert(A == 4 && B == 5 && C >= 0 && C <= 3, "C tiles 0-3, A tile 4, B tile 5");
    constexpr int T = C;
#define TQ_DPBF16PS(t) _tile_dpbf16ps(t, 4, 5)
    TQ_TILE_CASES(TQ_DPBF16PS);
#undef TQ_DPBF16PS
  }
#undef TQ_TILE_CASES
};

}  // namespace tq::amx
#endif
