/**
 * Start-up's first step: the engine processes (serving, and the head and image engines when asked
 * for) are forked together as soon as the flags are read, before this process loads the rest of the
 * server. Each spends most of its start loading libtorch, on a core of its own, while this one loads
 * the HTTP app, the tokenizers and the tasks (load-service.ts): start to /ready is the slowest of them,
 * not their sum (bench:startup). The serving model may run in several engine processes (--engines, a
 * --device list): one group (engine-process/group.ts). `stopAll` stops every engine, started or still starting.
 */
import * as os from 'os';
import { ResolvedBase, resolveBase } from '../config/bases';
import { engineLoad } from '../config/engine-load';
import { NativeLoadOptions } from '../engine/native';
import { busyPollMs, callsInFlight, engineDevices, Flags } from '../config/flags';
import { EngineClient, StartingEngine } from './engine-process/client';
import { EngineGroup } from './engine-process/group';
import { HostArgs } from './engine-process/protocol';
import { Logger } from './ops/logger';
import type { EngineRole } from './ops/metrics';

export interface StartingEngines {
  text: { base: ResolvedBase; group: Promise<EngineGroup> };
  head?: StartingEngine;
  image?: StartingEngine;
  /** Stops each engine, now or when it has started. */
  stopAll(): void;
}

export type Died = (role: EngineRole) => (reason: string) => void;

/** The serving engines: one process per device, each on its share of the CPU's cores unless --threads says. */
function startServingGroup(flags: Flags, load: NativeLoadOptions, died: Died, logger: Logger): Promise<EngineGroup> {
  const devices = engineDevices(flags);
  const threads = flags.threads || Math.max(1, Math.floor(os.cpus().length / devices.length));
  const args: HostArgs[] = devices.map((device) => ({ load: { ...load, device, threads }, batchTokens: flags['batch-tokens'], busyPollMs: busyPollMs(flags), callsInFlight: callsInFlight(flags) }));
  return EngineGroup.start(args, devices, {
    allDead: died('text'),
    died: (m, reason) => logger.error({ event: 'engine_died', engine: 'text', index: m.index, pid: m.client.pid }, `engine ${m.index} (${m.device}): ${reason}; its requests in flight answered 503, restarting it while the others answer`),
    restarted: (m) => logger.info({ event: 'engine_restarted', engine: 'text', index: m.index, pid: m.client.pid, restarts: m.restarts }, `engine ${m.index} (${m.device}) restarted: process ${m.client.pid}`),
    restartFailed: (m, e) => logger.error({ event: 'engine_restart_failed', engine: 'text', index: m.index }, `engine ${m.index} (${m.device}) failed to start again: ${e.message}; trying again`),
  });
}

/**
 * Resolves the bases (a bad one throws before any process starts) and forks their engine processes; the image
 * engine's after its pixel budget's module (sharp) has loaded, which only an image engine needs.
 */
export async function startEngines(flags: Flags, died: Died, logger: Logger): Promise<StartingEngines> {
  const text = resolveBase(flags.base, flags['models-dir']);
  const head = flags['head-engine'] ? resolveBase(flags['head-engine'], flags['models-dir']) : undefined;
  const image = flags['image-model'] ? resolveBase(flags['image-model'], flags['models-dir']) : undefined;
  const load = engineLoad(flags, text);
  const starting: Promise<{ stop(): void }>[] = [];
  const start = (base: ResolvedBase, role: EngineRole, args: Omit<HostArgs, 'batchTokens' | 'busyPollMs' | 'callsInFlight'>): StartingEngine => {
    const client = EngineClient.start({ ...args, batchTokens: flags['batch-tokens'], busyPollMs: busyPollMs(flags), callsInFlight: callsInFlight(flags) }, died(role));
    client.catch(() => undefined); // awaited by load-service.ts
    starting.push(client);
    return { base, client };
  };
  const group = startServingGroup(flags, load, died, logger);
  group.catch(() => undefined); // awaited by load-service.ts
  starting.push(group);
  const engines: StartingEngines = {
    text: { base: text, group },
    head: head && start(head, 'head', { load: { ...load, path: head.checkpoint } }),
    stopAll: () => starting.forEach((s) => s.then((c) => c.stop(), () => undefined)),
  };
  if (image) {
    const { budgetOfTokens } = await import('../images/preprocess');
    const budget = budgetOfTokens(flags['image-max-tokens']);
    engines.image = start(image, 'image', { load: { ...load, path: image.checkpoint, visionCacheMiB: flags['vision-cache-mib'] }, images: { budget, model: image.checkpoint } });
  }
  return engines;
}
