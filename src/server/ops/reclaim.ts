/**
 * Memory that comes back after a burst of large requests.
 *
 * A large body leaves garbage behind: the socket's chunks and the joined body (Buffers, outside V8's heap),
 * the body's text and what JSON.parse made of it. V8 collects only when JavaScript allocates, so once the
 * burst is over and the server waits, nothing collects it, and its Buffers hold their memory as long: the
 * process stayed at several times its size before the burst (docs/operations.md, "Memory"). So when the
 * server has had no request in flight for RECLAIM.idleMs and its resident size has grown by
 * RECLAIM.growthBytes since it last collected, it collects everything (a full GC: some tens of
 * milliseconds over a heap of this size, taken while idle; a request arriving then waits for it), then
 * gives the C heap's free pages back (malloc_trim, the server's own small addon: csrc/host_addon/).
 * Without the trim most of the memory stayed: glibc returns freed memory only from an arena's top.
 *
 * V8 gives the collector to JavaScript only with --expose-gc; the flag is set here at run time and the
 * function read from a new context, as jest-leak-detector does, so that `node dist/tqserve.js` and every
 * launcher of it need no flag.
 */
import { setFlagsFromString } from 'v8';
import { runInNewContext } from 'vm';
import { addonCandidates } from '../../common/built-addon';
import { hostAddon } from '../../common/host-addon';
import { Lifecycle } from './lifecycle';
import { Logger } from './logger';

export const RECLAIM = { idleMs: 1000, growthBytes: 64 << 20, sweepMs: 200 };

function fullCollector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc');
}

/** glibc's malloc_trim, from the server's addon; undefined when it is not built. */
function freePagesRelease(logger: Logger): (() => boolean | null) | undefined {
  const addon = hostAddon();
  if (addon) return addon.releaseFreeMemory;
  logger.warn(`the server's addon is not built (looked for ${addonCandidates('tqserve_host').join(', ')}): after a burst, memory comes back only as far as V8 frees it, and the engines' channel is the IPC pipe alone (no shared memory to spin on); run: npm run build:addon`);
}

export function reclaimWhenIdle(lifecycle: Lifecycle, logger: Logger, limits = RECLAIM) {
  const collectGarbage = fullCollector();
  const releaseFreePages = freePagesRelease(logger);
  let afterLastCollection = process.memoryUsage.rss();
  let timer: NodeJS.Timeout | undefined;
  const collectIfStillIdle = () => {
    timer = undefined;
    const before = process.memoryUsage.rss();
    if (lifecycle.requestsInFlight > 0 || before - afterLastCollection < limits.growthBytes) return;
    const t0 = performance.now();
    collectGarbage();
    const collectedMs = performance.now() - t0;
    // The Buffers' memory is freed after the collection, by V8's array-buffer sweeper on another thread.
    setTimeout(() => {
      releaseFreePages?.();
      const after = process.memoryUsage.rss();
      // The baseline only while still idle: requests begun since would count their own memory in it.
      if (lifecycle.requestsInFlight === 0) afterLastCollection = after;
      const mib = (b: number) => Math.round(b / 2 ** 20);
      logger.info({ event: 'memory_reclaimed', rss_before_mib: mib(before), rss_after_mib: mib(after), collection_ms: Math.round(collectedMs) }, 'idle after a burst: garbage collected, free pages released');
    }, limits.sweepMs).unref();
  };
  lifecycle.onIdle(() => {
    clearTimeout(timer);
    timer = setTimeout(collectIfStillIdle, limits.idleMs).unref();
  });
}
