/**
 * The environment of a process that computes with large tensors (the float64 references, the native checks): glibc's
 * malloc keeps what it frees for its next tensors instead of handing it back to the kernel. By default a block above
 * 128 KiB is mapped on its own and unmapped when freed, so each later tensor faulted its pages in again, zeroed: a
 * third of the float64 references' time and a fifth of the cascade check's went to the kernel (bench/README.md,
 * "Set-up and suite time"). Not for the server and engine processes, whose memory the tests measure (the engine
 * sets its own thresholds: csrc/engine/host_allocator.cpp).
 */
export function keepFreedMemory(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...env, MALLOC_MMAP_THRESHOLD_: String(1 << 30), MALLOC_TRIM_THRESHOLD_: String(2 ** 32) };
}
