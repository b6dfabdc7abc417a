/**
 * Start-up's long part: resolve the base, start the engine processes (serving, and the head and
 * image engines when asked for), open the tasks, and assemble the Service the routes share.
 * `died(role)` is told when an engine process dies. On failure every engine started is stopped:
 * they are kept in one list, stopped in one place.
 */
import * as os from 'os';
import { ResolvedBase, resolveBase } from '../config/bases';
import { Flags } from '../config/flags';
import { rendererFor, temperaturesOf } from '../config/profile-flags';
import { NativeLoadOptions } from '../engine/native';
import { Temperatures } from '../rendering/profile';
import { Renderer } from '../rendering/renderer';
import { HIDDEN_TAP } from '../tasks/fingerprint';
import { openTasks } from '../tasks/open';
import { refusalLine } from '../tasks/store';
import { EngineClient } from './engine-process/client';
import { startImageEngine } from './service/image-engine';
import { InFlight } from './service/inflight';
import { Logger } from './ops/logger';
import { EngineRole, EngineSource } from './ops/metrics';
import { ImageService, Service } from './service/service';

export interface Loaded {
  service: Service;
  /** Every engine process started, by role: for /metrics and for the drain to stop. */
  engines: EngineSource[];
}

type Died = (role: EngineRole) => (reason: string) => void;

interface HeadEngine {
  base: ResolvedBase;
  renderer: Renderer;
  engine: EngineClient;
}

/** What every engine process loads its model with, from the flags (the head and image engines change the path). */
function engineLoad(flags: Flags, base: ResolvedBase): NativeLoadOptions {
  return {
    path: base.checkpoint,
    dtype: flags.dtype,
    threads: flags.threads || os.cpus().length,
    prefixCache: flags['prefix-cache'] === 'on',
    batchInvariant: flags['batch-invariant'] === 'on',
    quantization: flags.quantization,
    attention: flags.attention,
    ...(flags['cuda-forward'] === 'fused' ? { kernels: 'fused' as const } : {}),
    cudaGraphs: flags['cuda-graphs'] === 'on',
    device: flags.device,
    registerBoundary: flags['register-boundary'],
    cacheMiB: flags['cache-mib'],
    gpuMemoryUtilization: flags['gpu-memory-utilization'],
  };
}

/** --head-engine: a second engine process, its own model and renderer, read for intent heads' hidden states. */
async function startHeadEngine(flags: Flags, load: NativeLoadOptions, died: Died, started: EngineSource[]): Promise<HeadEngine> {
  const base = resolveBase(flags['head-engine']!, flags['models-dir']);
  const renderer = await rendererFor(base, flags);
  const engine = await EngineClient.start({ load: { ...load, path: base.checkpoint }, batchTokens: flags['batch-tokens'] }, died('head'));
  started.push({ engine: 'head', client: engine });
  return { base, renderer, engine };
}

/** Where intent heads' hidden states come from, as /health and GET /v1/tasks report it. */
function headEngineReport(head: HeadEngine | undefined, serving: EngineClient): Record<string, unknown> {
  if (!head) return { engine: 'serving engine', tap: HIDDEN_TAP, hidden_size: serving.info.hiddenSize };
  const { info } = head.engine;
  return {
    engine: 'second engine process (--head-engine)',
    base: head.base.profile.name,
    checkpoint: head.base.checkpoint,
    architecture: info.architecture,
    dtype: info.dtype,
    pid: head.engine.pid,
    tap: HIDDEN_TAP,
    hidden_size: info.hiddenSize,
  };
}

/** The tasks and their books (--tasks-file loaded), the image route's abstention book handed to it. */
function openTheTasks(flags: Flags, base: ResolvedBase, renderer: Renderer, temperatures: Temperatures, head: HeadEngine | undefined, images: ImageService | undefined) {
  try {
    const opened = openTasks({
      file: flags['tasks-file'],
      enabled: flags.tasks === 'on',
      abstention: { enabled: flags.abstention === 'on', defaultOption: flags['abstain-option'] },
      checkpoint: base.checkpoint,
      profile: renderer.profile,
      temperatures,
      headCheckpoint: head?.base.checkpoint,
      quantization: flags.quantization,
      imageFingerprint: images?.fingerprint,
    });
    if (images) images.context.abstentions = opened.imageAbstentionBook;
    return opened;
  } catch (e) {
    throw new Error(`--tasks-file ${flags['tasks-file']}: cannot be read as a tasks file (${(e as Error).message}); it is left as it is`);
  }
}

export async function loadService(flags: Flags, logger: Logger, died: Died): Promise<Loaded> {
  const base = resolveBase(flags.base, flags['models-dir']);
  if (base.note) logger.warn(`WARNING: ${base.note}`);
  const load = engineLoad(flags, base);
  const started: EngineSource[] = [];
  // The engine process loads libtorch and the model while this one loads the tokenizer: together
  // rather than one after the other, start to /ready is shorter (bench:startup).
  const engineStarting = EngineClient.start({ load, batchTokens: flags['batch-tokens'] }, died('text'));
  engineStarting.catch(() => undefined); // awaited below, after the renderer
  try {
    const renderer = await rendererFor(base, flags);
    const engine = await engineStarting;
    started.push({ engine: 'text', client: engine });
    const head = flags['head-engine'] ? await startHeadEngine(flags, load, died, started) : undefined;
    const servedName = flags['served-name'] ?? base.profile.servedName;
    let images: ImageService | undefined;
    if (flags['image-model']) {
      const image = await startImageEngine(flags['image-model'], flags, load, flags['batch-tokens'], servedName, died('image'));
      started.push({ engine: 'image', client: image.engine });
      if (image.note) logger.warn(`WARNING: image model: ${image.note}`);
      images = image.service;
    }
    const temperatures = temperaturesOf(base.profile.temperatures, flags);
    const { store: tasks, book: taskBook, abstentionBook } = openTheTasks(flags, base, renderer, temperatures, head, images);
    for (const r of tasks.refused) logger.warn(`WARNING: ${refusalLine(r)}`);
    if (engine.info.dtypeNote) logger.warn(`WARNING: ${engine.info.dtypeNote}`);
    const service: Service = {
      base,
      tasks,
      taskBook,
      distributions: taskBook,
      abstentionBook,
      abstentions: abstentionBook,
      headEngine: head && { engine: head.engine, renderer: head.renderer },
      headEngineReport: headEngineReport(head, engine),
      servedName,
      images,
      renderer,
      temperatures,
      engine,
      cacheReport: () => engine.cacheReport(),
      engineInfo: engine.info,
      engineProcess: { pid: engine.pid, where: `child process ${engine.pid} of server ${process.pid}` },
      debugReadout: flags['debug-readout'],
      cacheSaltHeader: flags['cache-salt-header'],
      corsOrigin: flags['cors-origin'],
      inflight: new InFlight(),
      startedAt: new Date(),
    };
    return { service, engines: started };
  } catch (e) {
    // The serving engine may still be starting (the renderer failed first): stopped once it has.
    if (!started.length) engineStarting.then((client) => client.stop(), () => undefined);
    for (const { client } of started) client.stop();
    throw e;
  }
}
