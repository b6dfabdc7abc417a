/**
 * Start-up's first step: the engine processes (serving, and the head and image engines when asked
 * for) are forked together as soon as the flags are read, before this process loads the rest of the
 * server. Each spends most of its start loading libtorch, on a core of its own, while this one loads
 * the HTTP app, the tokenizers and the tasks (load-service.ts): start to /ready is the slowest of them,
 * not their sum (bench:startup). `stopAll` stops every engine, started or still starting.
 */
import { ResolvedBase, resolveBase } from '../config/bases';
import { engineLoad } from '../config/engine-load';
import { Flags } from '../config/flags';
import { EngineClient, StartingEngine } from './engine-process/client';
import { HostArgs } from './engine-process/protocol';
import type { EngineRole } from './ops/metrics';

export interface StartingEngines {
  text: StartingEngine;
  head?: StartingEngine;
  image?: StartingEngine;
  /** Stops each engine, now or when it has started. */
  stopAll(): void;
}

export type Died = (role: EngineRole) => (reason: string) => void;

/**
 * Resolves the bases (a bad one throws before any process starts) and forks their engine processes; the image
 * engine's after its pixel budget's module (sharp) has loaded, which only an image engine needs.
 */
export async function startEngines(flags: Flags, died: Died): Promise<StartingEngines> {
  const text = resolveBase(flags.base, flags['models-dir']);
  const head = flags['head-engine'] ? resolveBase(flags['head-engine'], flags['models-dir']) : undefined;
  const image = flags['image-model'] ? resolveBase(flags['image-model'], flags['models-dir']) : undefined;
  const load = engineLoad(flags, text);
  const starting: Promise<EngineClient>[] = [];
  const start = (base: ResolvedBase, role: EngineRole, args: Omit<HostArgs, 'batchTokens'>): StartingEngine => {
    const client = EngineClient.start({ ...args, batchTokens: flags['batch-tokens'] }, died(role));
    client.catch(() => undefined); // awaited by load-service.ts
    starting.push(client);
    return { base, client };
  };
  const engines: StartingEngines = {
    text: start(text, 'text', { load }),
    head: head && start(head, 'head', { load: { ...load, path: head.checkpoint } }),
    stopAll: () => starting.forEach((client) => client.then((c) => c.stop(), () => undefined)),
  };
  if (image) {
    const { budgetOfTokens } = await import('../images/preprocess');
    const budget = budgetOfTokens(flags['image-max-tokens']);
    engines.image = start(image, 'image', { load: { ...load, path: image.checkpoint, visionCacheMiB: flags['vision-cache-mib'] }, images: { budget, model: image.checkpoint } });
  }
  return engines;
}
