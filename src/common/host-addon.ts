/**
 * The torch-free addon (csrc/host_addon/): what the HTTP server and its engine processes need from C and
 * the kernel that Node does not give. Loaded once; undefined when it is not built (the server then runs
 * without it: see each user).
 */
import { builtAddon } from './built-addon';

export interface HostAddon {
  /** glibc's malloc_trim: true when memory was released; null where the C library has none. */
  releaseFreeMemory(): boolean | null;
  /** glibc's mallopt(M_MMAP_THRESHOLD): blocks under `bytes` come from the heap; false where not set (not glibc). */
  setMmapThreshold(bytes: number): boolean;
  /** A new anonymous shared memory (a memfd, close-on-exec) of `bytes`, zeroed and mapped. */
  createSharedMemory(bytes: number): { fd: number; buffer: ArrayBuffer };
  /** The shared memory behind an inherited fd, mapped. */
  mapSharedMemory(fd: number, bytes: number): ArrayBuffer;
}

let loaded: HostAddon | undefined | null;

export function hostAddon(): HostAddon | undefined {
  if (loaded === undefined) {
    const file = builtAddon('tqserve_host');
    loaded = file ? (require(file) as HostAddon) : null;
  }
  return loaded ?? undefined;
}
