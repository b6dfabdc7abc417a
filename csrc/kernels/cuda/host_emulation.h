// The CUDA built-ins the row, merge, readout, split-key and few-row GEMM kernels' bodies use (row_kernels.cuh,
// attention_merge.cuh, label_readout.cuh, split_key_attention.cuh, few_rows_mma.cuh), for a host compiler: so that the
// CPU checks run those bodies themselves, launch geometry, lanes, shuffles and barriers included, and compare their
// bits with the host forms (test/native/row_kernels_check.cpp). Under nvcc this header only names the dynamic shared
// memory and the vector store. On the host, run_grid() runs a launch one block at a time (the last first), each of its
// threads a fiber of the calling thread (its own stack, switched to by ucontext): a thread runs until it waits, then
// the next runs (by turns lowest first and highest first). __syncthreads() waits for the block's threads, __syncwarp()
// for the warp's, and __shfl_sync() passes (and __shfl_down_sync(), __shfl_xor_sync()) a value through the warp's slots
// between two such waits. Fibers, not host threads: a host thread's wait is a trip through the kernel's scheduler, and
// the checks' launches wait millions of times (bench/README.md, "Set-up and suite time"). __shared__ variables are a
// block's because one block runs at a time, poisoned at its start where the body names them (block_shared). It emulates
// what these kernels use, not CUDA: a warp's lanes must all reach each __syncwarp() and __shfl_sync() (these kernels'
// warps do: a warp leaves whole), and the block's threads each __syncthreads(); a launch whose threads wait for one
// that never comes is stopped with a message, not hung. Two PTX instructions too: cp.async (a copy landing at the
// wait_group that covers it) and the tensor cores' mma.m16n8k16 (its fragments exchanged like a shuffle's values, its
// sums by a model of ours, not the hardware's rounding).
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
namespace tq::cuda {
// The launch's dynamic shared memory, as T.
template <typename T>
__device__ T* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char tq_dynamic_shared[];
  return reinterpret_cast<T*>(tq_dynamic_shared);
}
// A store of a vector type (uint2, uint4...) or a word at `to`, which must be a multiple of its size.
template <typename T>
__device__ void store_vector(void* to, const T& value) {
  *static_cast<T*>(to) = value;
}
// Names a body's __shared__ variables: nothing on a GPU; in the CPU checks each is poisoned at its block's start.
template <typename... T>
__device__ void block_shared(T&...) {}
}  // namespace tq::cuda
#else
#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint2 {
  unsigned x, y;
};
struct float4 {
  float x, y, z, w;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace tq::emulation {

// The fibers of the block running now, and the switches between them (run_grid below).
class Fibers {
 public:
  // From a waiting thread back to the scheduler, which runs the others before it comes back here.
  static void yield() { swapcontext(&running->fiber().context, &running->scheduler_); }
  // Something happened that a waiting thread may be waiting for (an arrival, a release, a thread's end).
  static void progressed() { ++running->events_; }

  // Each thread's stack is 256 KiB under a guard page, mapped without reserving memory: a thread touches a few pages.
  explicit Fibers(size_t threads) : fibers_(threads), bytes_((kStackBytes + kPage) * threads) {
    base_ = static_cast<unsigned char*>(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base_ == MAP_FAILED) fail("no memory for the fibers' stacks");
    for (size_t t = 0; t < threads; ++t) mprotect(stack_of(t) - kPage, kPage, PROT_NONE);
  }
  ~Fibers() { munmap(base_, bytes_); }
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;

  // Runs thread(t) for every t as a fiber of its own until each has returned; enter(t) is called before each of
  // thread t's turns (so that it finds its own threadIdx and warp).
  void run(const std::function<void(size_t)>& thread, const std::function<void(size_t)>& enter) {
    thread_ = &thread;
    for (size_t t = 0; t < fibers_.size(); ++t) {
      Fiber& f = fibers_[t];
      f.done = false;
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = stack_of(t);
      f.context.uc_stack.ss_size = kStackBytes;
      f.context.uc_link = &scheduler_;
      makecontext(&f.context, &Fibers::start, 0);
    }
    Fibers* outer = running;
    running = this;
    // Rounds take the threads in turn, lowest first, then highest first, and so on: between two waits a GPU's threads
    // run in any order, so a body that reads what another thread writes without a barrier between shows it either way.
    const size_t n = fibers_.size();
    for (size_t left = n, round = 0; left > 0; ++round) {
      const uint64_t before = events_;
      for (size_t i = 0; i < n; ++i) {
        current_ = round % 2 == 0 ? i : n - 1 - i;
        if (fibers_[current_].done) continue;
        enter(current_);
        swapcontext(&scheduler_, &fibers_[current_].context);
        if (fibers_[current_].done) --left;
      }
      // A whole round in which every thread left found itself still waiting: they wait for one that will not come.
      if (left > 0 && events_ == before) fail("the block's threads wait at a barrier some of them never reach");
    }
    running = outer;
  }

 private:
  struct Fiber {
    ucontext_t context;
    bool done = false;
  };
  static constexpr size_t kPage = 4096, kStackBytes = 256 << 10;
  unsigned char* stack_of(size_t t) const { return base_ + t * (kStackBytes + kPage) + kPage; }
  Fiber& fiber() { return fibers_[current_]; }
  static void start() {
    Fibers& f = *running;
    (*f.thread_)(f.current_);
    f.fiber().done = true;
    progressed();
  }  // returns to the scheduler (uc_link)
  [[noreturn]] static void fail(const char* why) {
    std::fprintf(stderr, "host_emulation: %s\n", why);
    std::abort();
  }

  static inline thread_local Fibers* running = nullptr;
  std::vector<Fiber> fibers_;
  size_t bytes_;
  unsigned char* base_ = nullptr;
  ucontext_t scheduler_;
  size_t current_ = 0;
  uint64_t events_ = 0;
  const std::function<void(size_t)>* thread_ = nullptr;
};

// Threads wait here until `count` have come; then all go on, and it is ready for the next round.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    const auto round = round_;
    Fibers::progressed();
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++round_;
      return;
    }
    while (round_ == round) Fibers::yield();
  }

 private:
  int count_, arrived_ = 0;
  uint64_t round_ = 0;
};

struct Warp {
  Barrier barrier{32};
  float slots[32] = {};
  uint32_t fragments[32][6] = {};  // each lane's a and b registers of a tensor-core product (mma_16816)
};
// A thread's cp.async copies not yet landed: each its 16 bytes, as read when issued, and its group (the count of
// commits before it).
struct PendingCopies {
  struct Copy {
    unsigned char* to;
    unsigned char bytes[16];
    uint64_t group;
  };
  std::vector<Copy> copies;
  uint64_t committed = 0;
};
struct ThreadContext {
  Barrier* block = nullptr;
  Warp* warp = nullptr;
  unsigned char* shared = nullptr;
  PendingCopies* copies = nullptr;
};
inline thread_local ThreadContext context;

}  // namespace tq::emulation

inline void __syncthreads() { tq::emulation::context.block->wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { tq::emulation::context.warp->barrier.wait(); }
namespace tq::emulation {
// Every lane of the warp puts its value in its slot; each then takes lane `from`'s. The second wait: every lane has read
// before the slots are written again.
inline float exchange(float value, unsigned from) {
  auto& warp = *context.warp;
  warp.slots[threadIdx.x % 32] = value;
  warp.barrier.wait();
  const float got = warp.slots[from % 32];
  warp.barrier.wait();
  return got;
}
}  // namespace tq::emulation

inline float __shfl_sync(unsigned, float value, int lane) { return tq::emulation::exchange(value, static_cast<unsigned>(lane)); }
// Lane l gets lane l ^ mask's value.
inline float __shfl_xor_sync(unsigned, float value, int mask) {
  return tq::emulation::exchange(value, (threadIdx.x % 32) ^ static_cast<unsigned>(mask));
}
// Lane l gets lane l + offset's value; a lane with none past it, its own.
inline float __shfl_down_sync(unsigned, float value, unsigned offset) {
  const unsigned lane = threadIdx.x % 32;
  return tq::emulation::exchange(value, lane + offset < 32 ? lane + offset : lane);
}
namespace tq::emulation {
// Counts the blocks run_grid() has started (from 1): which block a body's __shared__ variables were poisoned for.
inline uint64_t block_serial = 0;

// A GPU's load or store of N bytes (a vector type's, or cp.async's 16) faults ("misaligned address") where the address
// is not a multiple of N; the host's does not. So the emulated ones check it (`__ldg`, cp.async, `store_vector`): a
// body that would fault on the device stops its CPU check with a message instead of passing it.
inline void check_aligned(const void* p, size_t bytes, const char* access) {
  if (reinterpret_cast<uintptr_t>(p) % bytes == 0) return;
  std::fprintf(stderr, "host_emulation: %s of %zu bytes at %p, not a multiple of %zu: a misaligned address on a GPU\n", access, bytes, p, bytes);
  std::abort();
}
}  // namespace tq::emulation

template <typename T>
T __ldg(const T* p) {
  tq::emulation::check_aligned(p, sizeof(T), "__ldg");
  return *p;
}

namespace tq::emulation {

// cp.async: `bytes` of the 16 read (the rest zeros), landing in shared memory only at a wait that covers its group,
// as on a GPU, where until then the destination holds what it held: a body that reads a stage before its wait reads
// that here too (the poison, or the stage's last contents).
inline void copy_16_async(void* to, const void* from, int bytes) {
  check_aligned(to, 16, "cp.async to shared memory");
  check_aligned(from, 16, "cp.async from global memory");
  PendingCopies::Copy copy{static_cast<unsigned char*>(to), {}, context.copies->committed};
  if (bytes > 0) std::memcpy(copy.bytes, from, static_cast<size_t>(bytes));
  context.copies->copies.push_back(copy);
}
// cp.async.commit_group: the copies issued since the last commit become a group.
inline void commit_copies() { ++context.copies->committed; }
// cp.async.wait_group: the copies of every committed group but the `pending` latest land.
inline void wait_copies(int pending) {
  auto& list = context.copies->copies;
  const uint64_t committed = context.copies->committed;
  size_t kept = 0;
  for (auto& copy : list) {
    if (copy.group + static_cast<uint64_t>(pending) < committed) std::memcpy(copy.to, copy.bytes, 16);
    else list[kept++] = copy;
  }
  list.resize(kept);
}

// The tensor cores' sum of 16 products into an fp32 accumulator, as modelled here: the products (exact in double)
// summed in double, added to the accumulator and rounded to fp32 once. A model, not the hardware's rounding, which only
// a GPU shows: the CPU check holds a kernel's fragments and indexing to it, bit for bit.
inline float mma_k16_model(float acc, const float* a_row, const float* b_col) {
  double sum = 0.0;
  for (int k = 0; k < 16; ++k) sum += static_cast<double>(a_row[k]) * static_cast<double>(b_col[k]);
  return static_cast<float>(static_cast<double>(acc) + sum);
}

inline float bf16_half(uint32_t word, bool high) {
  const uint32_t bits = high ? (word & 0xffff0000u) : (word << 16);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// PTX's mma.m16n8k16.row.col with bf16 a and b, fp32 d: every lane of the warp passes its fragment registers (PTX's
// layout: lane = 4 groupID + threadID_in_group; a's element (r, c) in register (r >= 8) + 2 (c >= 8) of lane
// 4 (r % 8) + (c % 8) / 2, b's (k, n) in register k >= 8 of lane 4 n + (k % 8) / 2, the even index in the low half),
// and takes its four of d: rows groupID and groupID + 8, columns 2 threadID_in_group and the next.
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  Warp& warp = *context.warp;
  const unsigned lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
  for (int i = 0; i < 4; ++i) warp.fragments[lane][i] = a[i];
  warp.fragments[lane][4] = b[0], warp.fragments[lane][5] = b[1];
  warp.barrier.wait();
  const auto a_at = [&](unsigned r, unsigned c) { return bf16_half(warp.fragments[4 * (r % 8) + (c % 8) / 2][(r >= 8) + 2 * (c >= 8)], c % 2 == 1); };
  const auto b_at = [&](unsigned k, unsigned n) { return bf16_half(warp.fragments[4 * n + (k % 8) / 2][4 + (k >= 8)], k % 2 == 1); };
  float rows[2][16], cols[2][16];
  for (unsigned k = 0; k < 16; ++k) {
    rows[0][k] = a_at(group, k), rows[1][k] = a_at(group + 8, k);
    cols[0][k] = b_at(k, 2 * quad), cols[1][k] = b_at(k, 2 * quad + 1);
  }
  warp.barrier.wait();  // every lane has read the registers before they are written again
  for (int i = 0; i < 4; ++i) d[i] = mma_k16_model(d[i], rows[i / 2], cols[i % 2]);
}

}  // namespace tq::emulation

namespace tq::cuda {
template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(emulation::context.shared);
}
template <typename T>
void store_vector(void* to, const T& value) {
  emulation::check_aligned(to, sizeof(T), "a vector store");
  std::memcpy(to, &value, sizeof(T));
}
// A body's __shared__ variables are statics here, kept from one block to the next, where a GPU's hold whatever was
// there: each is poisoned (all ones: NaN as a float) when the first of its block's threads names it, before any writes.
template <typename... T>
void block_shared(T&... variables) {
  static std::unordered_map<const void*, uint64_t> poisoned_in;
  const auto poison = [](void* at, size_t bytes) {
    uint64_t& block = poisoned_in[at];
    if (block == emulation::block_serial) return;
    block = emulation::block_serial;
    std::memset(at, 0xff, bytes);
  };
  (poison(&variables, sizeof variables), ...);
}
}  // namespace tq::cuda

namespace tq::emulation {

inline constexpr size_t kSharedGuardBytes = 256;
inline constexpr unsigned char kSharedGuard = 0xa5;

// kernel(args) over grid x block, as a launch with `shared_bytes` of dynamic shared memory would run it. Blocks
// one after another (their __shared__ variables are then theirs), each block's threads as fibers taking turns.
template <typename Args>
void run_grid(void (*kernel)(Args), const Args& args, dim3 grid, dim3 block, size_t shared_bytes) {
  const unsigned threads = block.x * block.y * block.z;
  Fibers fibers(threads);
  // The last block first: a GPU runs a launch's blocks in any order and many at once, so a body that reads what an
  // earlier block wrote races there; run in the order opposite to the grid's, it reads what is not yet written here.
  const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
  for (size_t b = blocks; b-- > 0;) {
    const unsigned bx = static_cast<unsigned>(b % grid.x), by = static_cast<unsigned>(b / grid.x % grid.y),
                   bz = static_cast<unsigned>(b / grid.x / grid.y);
    Barrier block_barrier(static_cast<int>(threads));
    std::vector<PendingCopies> copies(threads);
    std::vector<std::unique_ptr<Warp>> warps;
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<Warp>());
    // A GPU's shared memory holds whatever was there: poisoned here (all ones: NaN as a float, -1 as an integer),
    // so that a body reading what it never wrote shows in its bits. And a guard past its end, checked after the
    // block: a write beyond the launch's bytes, which on a GPU faults or overwrites another block's, stops the check.
    std::vector<unsigned char> shared(shared_bytes + 16 + kSharedGuardBytes, kSharedGuard);
    unsigned char* aligned = shared.data() + (16 - reinterpret_cast<uintptr_t>(shared.data()) % 16) % 16;
    std::memset(aligned, 0xff, shared_bytes);
    ++block_serial;
    blockIdx = dim3(bx, by, bz);
    blockDim = block;
    gridDim = grid;
    fibers.run([&](size_t) { kernel(args); },
               [&](size_t t) {
                 const unsigned u = static_cast<unsigned>(t);
                 threadIdx = dim3(u % block.x, (u / block.x) % block.y, u / (block.x * block.y));
                 context = {&block_barrier, warps[t / 32].get(), aligned, &copies[t]};
               });
    for (const unsigned char* g = aligned + shared_bytes; g < shared.data() + shared.size(); ++g)
      if (*g != kSharedGuard) {
        std::fprintf(stderr, "host_emulation: a block wrote past its %zu bytes of dynamic shared memory (at byte %zu)\n", shared_bytes, static_cast<size_t>(g - aligned));
        std::abort();
      }
  }
}

}  // namespace tq::emulation
#endif
