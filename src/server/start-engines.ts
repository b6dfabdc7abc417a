/**
 * Start-up's first step: the engine processes (serving, and the head and image engines when asked
 * for) are forked together as soon as the flags are read, before this process loads the rest of the
 * server. Each spends most of its start loading libtorch, on a core of its own, while this one loads
 * the HTTP app, the tokenizers and the tasks (load-service.ts): start to /ready is the slowest of them,
 * not their sum (bench:startup). The serving model may run in several engine processes (--engines, a
 * --device list): one group (engine-process/group.ts). Engines that share one GPU's memory (several serving engines on
 * it, or the head or image engine beside them) start after that device's first and take its budget
 * (engine-process/device-shares.ts). `stopAll` stops every engine, started or still starting.
 */
import * as os from 'os';
import { ResolvedBase, resolveBase } from '../config/bases';
import { engineLoad } from '../config/engine-load';
import { NativeLoadOptions } from '../engine/native';
import { busyPollMs, callsInFlight, engineDevices, Flags } from '../config/flags';
import { EngineClient, StartingEngine } from './engine-process/client';
import { deviceShares, EngineStart, sizedAs } from './engine-process/device-shares';
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

/** The serving engines' arguments: one process per device, each on its share of the CPU's cores unless --threads says. */
function servingArgs(flags: Flags, load: NativeLoadOptions): HostArgs[] {
  const devices = engineDevices(flags);
  const threads = flags.threads || Math.max(1, Math.floor(os.cpus().length / devices.length));
  return devices.map((device) => ({ load: { ...load, device, threads }, batchTokens: flags['batch-tokens'], busyPollMs: busyPollMs(flags), callsInFlight: callsInFlight(flags) }));
}

function startServingGroup(flags: Flags, starts: EngineStart<HostArgs>[], died: Died, logger: Logger): Promise<EngineGroup> {
  return EngineGroup.start(starts, engineDevices(flags), {
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
  const serving = servingArgs(flags, load);
  // The head and image engines run on the first serving device (the first of a --device list).
  const device = engineDevices(flags)[0];
  const headLoad = head && { load: { ...load, device, path: head.checkpoint } };
  const imageLoad = image && { load: { ...load, device, path: image.checkpoint, visionCacheMiB: flags['vision-cache-mib'] } };
  // One plan over every engine: the serving ones first, so that a device's first engine is a serving one where it has one.
  const plan = deviceShares([...serving, ...(headLoad ? [headLoad] : []), ...(imageLoad ? [imageLoad] : [])]);
  const starting: Promise<{ stop(): void }>[] = [];
  const group = startServingGroup(flags, plan.slice(0, serving.length) as EngineStart<HostArgs>[], died, logger);
  group.catch(() => undefined); // awaited by load-service.ts
  starting.push(group);
  const clients: Promise<EngineClient>[] = [];
  /** The engine at `index` of the plan, once started (a serving one once the group has). */
  const startedAt = (index: number): Promise<EngineClient> => (index < serving.length ? group.then((g) => g.members[index].client) : clients[index - serving.length]);
  const start = (base: ResolvedBase, role: EngineRole, share: EngineStart<Omit<HostArgs, 'batchTokens' | 'busyPollMs' | 'callsInFlight'>>): StartingEngine => {
    const launch = (args: typeof share.args) =>
      EngineClient.start({ ...args, batchTokens: flags['batch-tokens'], busyPollMs: busyPollMs(flags), callsInFlight: callsInFlight(flags) }, died(role));
    const client = share.follows === undefined ? launch(share.args) : startedAt(share.follows).then((first) => launch(sizedAs(share.args, first.info)));
    client.catch(() => undefined); // awaited by load-service.ts
    clients.push(client);
    starting.push(client);
    return { base, client };
  };
  const engines: StartingEngines = {
    text: { base: text, group },
    head: head && start(head, 'head', plan[serving.length]),
    stopAll: () => starting.forEach((s) => s.then((c) => c.stop(), () => undefined)),
  };
  if (image) {
    const { budgetOfTokens } = await import('../images/preprocess');
    const budget = budgetOfTokens(flags['image-max-tokens']);
    const share = plan[plan.length - 1];
    engines.image = start(image, 'image', { ...share, args: { ...share.args, images: { budget, model: image.checkpoint } } });
  }
  return engines;
}
