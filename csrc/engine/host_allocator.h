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
// trim), so under varied load the process would grow without bound;
// malloc_trim(0) also returns whole free pages inside the heaps. The floor
// keeps what the next call would fault in again (a state's tensors), which
// returning everything after every call cost in page faults (bench/history/2026-11.md,
// "Soak").
inline constexpr size_t kKeptFreeHostBytes = size_t{128} << 20;
void release_free_host_memory();

}  // namespace tq
