/**
 * Engines that share one CUDA device (`--engines 2 --device cuda`; the head or image engine beside the serving one)
 * and size their KV caches by its memory (`--gpu-memory-utilization`, no `--cache-mib`). Each engine takes its share
 * of the memory free when it measures, so engines started together would each take 0.9 of the same free memory, and
 * the second allocation would fail. So on such a device the first engine starts alone, taking `utilization / k` of
 * what its weights leave free (k engines on the device), and the others, then that first engine's restarts too, take
 * the same budget by size (`cacheMiB`): every engine on the device the same cache, together the share one engine
 * would take, whatever order they measure in.
 */
import { NativeEngineInfo, NativeLoadOptions } from '../../engine/native';

type Loading = { load: NativeLoadOptions };

/** How an engine starts: its arguments, and the engine whose budget it waits to take (its device's first), by index. */
export interface EngineStart<A extends Loading> {
  args: A;
  follows?: number;
}

const sizedByDeviceMemory = (a: Loading) =>
  (a.load.device ?? 'cpu').startsWith('cuda') && !a.load.cacheMiB && !a.load.cacheTokens && (a.load.gpuMemoryUtilization ?? 0) > 0;

/** Each engine's start: alone on its device (or sized otherwise) as given; else as its device's first, or following it. */
export function deviceShares<A extends Loading>(args: A[]): EngineStart<A>[] {
  const firstOn = new Map<string, number>();
  const count = new Map<string, number>();
  for (const a of args.filter(sizedByDeviceMemory)) count.set(a.load.device!, (count.get(a.load.device!) ?? 0) + 1);
  return args.map((a, i) => {
    const k = sizedByDeviceMemory(a) ? count.get(a.load.device!)! : 1;
    if (k === 1) return { args: a };
    const first = firstOn.get(a.load.device!);
    if (first !== undefined) return { args: a, follows: first };
    firstOn.set(a.load.device!, i);
    return { args: { ...a, load: { ...a.load, gpuMemoryUtilization: a.load.gpuMemoryUtilization! / k } } };
  });
}

/** `args` sized as the device's first engine sized its cache (in whole MiB, so never more than it took). */
export function sizedAs<A extends Loading>(args: A, first: NativeEngineInfo): A {
  return { ...args, load: { ...args.load, cacheMiB: Math.max(1, Math.floor(first.cacheBytes / 2 ** 20)) } };
}
