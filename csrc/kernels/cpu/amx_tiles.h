// The tile operations the AMX int8 GEMM (gemm_amx.cpp) is written against,
// with two implementations: the hardware's (Intel AMX: 8 tile registers of up
// to 16 rows x 64 bytes, TDPBUSD), and a plain model of it that runs on any
// CPU, so that the kernel's tiling, packing, edges and threads are tested
// everywhere (test/native/int8_check.cpp). An integer dot product has one
// exact result, so the model's bits are the hardware's.
//
// Every tile here is configured whole: 16 rows of 64 bytes (A: 16 rows x 64 u8
// activations, 16 steps of 4 k; B: 16 steps x 16 columns x 4 s8 weights; C: 16
// rows x 16 int32 sums). A kernel passes tile numbers as template arguments:
// the instructions take them as immediates.
#pragma once
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

}  // namespace tq::amx

#if defined(__x86_64__)
#include <immintrin.h>

namespace tq::amx {

#define TQ_AMX __attribute__((target("amx-tile,amx-int8")))

// The hardware: the same operations as instructions. configure() loads the
// tile configuration on the calling thread (every tile 16 x 64 bytes); the
// process must have been granted tile state first (cpu_has_amx_int8).
struct HardwareTiles {
  TQ_AMX static void configure() {
    alignas(64) unsigned char config[64] = {};
    config[0] = 1;  // palette 1
    for (int t = 0; t < 8; ++t) {
      const uint16_t colsb = kTileBytes;
      std::memcpy(config + 16 + 2 * t, &colsb, 2);
      config[48 + t] = kTileRows;
    }
    _tile_loadconfig(config);
  }
  TQ_AMX static void release() { _tile_release(); }
  // GCC's tile intrinsics paste their tile number into the instruction's text: it must be a literal, so each
  // operation spells out the tiles the kernel uses (C 0-3, A 4, B 5).
#define TQ_TILE_CASES(op) \
  if constexpr (T == 0) op(0);  \
  else if constexpr (T == 1) op(1); \
  else if constexpr (T == 2) op(2); \
  else if constexpr (T == 3) op(3); \
  else if constexpr (T == 4) op(4); \
  else op(5)
  template <int T>
  TQ_AMX static void zero() {
    static_assert(T >= 0 && T <= 5, "tiles 0-5");
#define TQ_ZERO(t) _tile_zero(t)
    TQ_TILE_CASES(TQ_ZERO);
#undef TQ_ZERO
  }
  template <int T>
  TQ_AMX static void load(const void* base, int64_t stride) {
    static_assert(T >= 0 && T <= 5, "tiles 0-5");
#define TQ_LOAD(t) _tile_loadd(t, base, stride)
    TQ_TILE_CASES(TQ_LOAD);
#undef TQ_LOAD
  }
  template <int T>
  TQ_AMX static void store(void* base, int64_t stride) {
    static_assert(T >= 0 && T <= 5, "tiles 0-5");
#define TQ_STORE(t) _tile_stored(t, base, stride)
    TQ_TILE_CASES(TQ_STORE);
#undef TQ_STORE
  }
  template <int C, int A, int B>
  TQ_AMX static void dpbusd() {
    static_assert(A == 4 && B == 5 && C >= 0 && C <= 3, "C tiles 0-3, A tile 4, B tile 5");
    constexpr int T = C;
#define TQ_DPBUSD(t) _tile_dpbusd(t, 4, 5)
    TQ_TILE_CASES(TQ_DPBUSD);
#undef TQ_DPBUSD
  }
#undef TQ_TILE_CASES
};

}  // namespace tq::amx
#endif
