/**
 * What an engine loads its model with, from the flags: the server's engine processes (server/start-engines.ts; the
 * head and image engines change the path) and `tqserve decide` alike, so that decide answers as the server does
 * (the same dtype, quantization, attention, device...: the answer is a function of those, not of the kernel level or
 * the threads, docs/arithmetic.md).
 */
import * as os from 'os';
import { NativeLoadOptions } from '../engine/native';
import { ResolvedBase } from './bases';
import { Flags } from './flags';

export function engineLoad(flags: Flags, base: ResolvedBase): NativeLoadOptions {
  return {
    path: base.checkpoint,
    dtype: flags.dtype,
    threads: flags.threads || os.cpus().length,
    prefixCache: flags['prefix-cache'] === 'on',
    batchInvariant: flags['batch-invariant'] === 'on',
    quantization: flags.quantization,
    arithmetic: flags.arithmetic,
    // Left unset, the engine chooses these by device (csrc/engine/engine_options.cpp, resolve_forward_defaults): on CUDA the
    // fused forward with CUDA graphs, on the CPU its own kernels. /health says what runs.
    ...(flags.attention ? { attention: flags.attention } : {}),
    ...(flags['cuda-forward'] ? { kernels: flags['cuda-forward'] } : {}),
    ...(flags['cuda-graphs'] ? { cudaGraphs: flags['cuda-graphs'] === 'on' } : {}),
    device: flags.device,
    registerBoundary: flags['register-boundary'],
    cacheMiB: flags['cache-mib'],
    gpuMemoryUtilization: flags['gpu-memory-utilization'],
  };
}
