// The process's C allocator (glibc's), set for an engine: keep what a forward
// pass frees and takes again within a call, give it back between calls.
#pragma once
#include <cstddef>

namespace tq {

// glibc gives blocks over its mmap threshold (which it raises by itself only
// up to the size of the last one freed), and free memory over 2x that at the
// top of a heap, back to the system; the next layer's outputs are then mapped
// and faulted in again, page by page (a quarter of a long step's time where a
// page fault is dear: bench/README.md, "Measurements behind the CPU kernels").
// So the mmap threshold is fixed at its largest (32 MiB) and up to 256 MiB
// kept. Called once per engine; elsewhere than glibc it does nothing.
void keep_freed_host_memory();

// Hands freed heap pages back to the OS after a call (looked at most once a
// second) when the free memory glibc holds is over kKeptFreeHostBytes. A
// forward pass allocates and frees tensors whose sizes follow the batch; glibc
// keeps what it freed inside its heaps (fragmented, so not at the top to
// trim), and under varied load the engine process grew by 390 MiB in 27.7k
// requests (issue 10). malloc_trim(0) also returns whole free pages inside the
// heaps. Returned after every call, the 43 MiB a 1,000-token state frees (51-65
// MiB with 16 questions; bench-llama, bf16) were faulted in again by the next:
// 9,500 page faults and 4% of a cold question (2 vCPU EPYC VM).
inline constexpr size_t kKeptFreeHostBytes = size_t{128} << 20;
void release_free_host_memory();

}  // namespace tq
