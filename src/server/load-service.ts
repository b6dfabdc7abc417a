/**
 * Start-up's long part: resolve the base, start the engine processes (serving, and the head and
 * image engines when asked for), open the tasks, and assemble the Service the routes share.
 * `died(role)` is told when an engine process dies. On failure every engine started is stopped.
 */
import * as os from 'os';
import { AbstentionBook } from '../tasks/abstention/book';
import { ResolvedBase, resolveBase } from '../config/bases';
import { Flags } from '../config/flags';
import { rendererFor, temperaturesOf } from '../config/profile-flags';
import { Renderer } from '../rendering/renderer';
import { TaskBook } from '../tasks/apply';
import { HIDDEN_TAP } from '../tasks/fingerprint';
import { openTasks } from '../tasks/open';
import { refusalLine, TaskStore } from '../tasks/store';
import { EngineClient } from './engine-process/client';
import { startImageEngine } from './service/image-engine';
import { InFlight } from './service/inflight';
import { Logger } from './ops/logger';
import { EngineRole, EngineSource } from './ops/metrics';
import { Service } from './service/service';

export interface Loaded {
  service: Service;
  /** Every engine process started, by role: for /metrics and for the drain to stop. */
  engines: EngineSource[];
}

export async function loadService(flags: Flags, logger: Logger, died: (role: EngineRole) => (reason: string) => void): Promise<Loaded> {
  const base = resolveBase(flags.base, flags['models-dir']);
  if (base.note) logger.warn(`WARNING: ${base.note}`);
  const temperatures = temperaturesOf(base.profile.temperatures, flags);
  const threads = flags.threads || os.cpus().length;

  const load = {
    path: base.checkpoint,
    dtype: flags.dtype,
    threads,
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
  const batchTokens = flags['batch-tokens'];
  // The engine process loads libtorch and the model while this one loads the tokenizer (1.1 s for
  // Qwen3's): one after the other, tiny-qwen3's start to /ready took 4.2 s (median of 5, bench:startup),
  // together 2.7 s in the same session.
  const engineStarting = EngineClient.start({ load, batchTokens }, died('text'));
  engineStarting.catch(() => undefined); // awaited below, after the renderer
  let renderer: Renderer;
  try {
    renderer = await rendererFor(base, flags);
  } catch (e) {
    engineStarting.then((started) => started.stop(), () => undefined);
    throw e;
  }
  const engine = await engineStarting;
  // --head-engine: a second engine process, its own model and renderer, read for intent heads' hidden states.
  let head: { base: ResolvedBase; renderer: Renderer; engine: EngineClient } | undefined;
  if (flags['head-engine']) {
    const headBase = resolveBase(flags['head-engine'], flags['models-dir']);
    const headRenderer = await rendererFor(headBase, flags);
    head = { base: headBase, renderer: headRenderer, engine: await EngineClient.start({ load: { ...load, path: headBase.checkpoint }, batchTokens }, died('head')) };
  }
  const servedName = flags['served-name'] ?? base.profile.servedName;
  let images: Awaited<ReturnType<typeof startImageEngine>> | undefined;
  if (flags['image-model']) {
    try {
      images = await startImageEngine(flags['image-model'], flags, load, batchTokens, servedName, died('image'));
    } catch (e) {
      engine.stop();
      head?.engine.stop();
      throw e;
    }
    if (images.note) logger.warn(`WARNING: image model: ${images.note}`);
  }
  let tasks: TaskStore, taskBook: TaskBook, abstentionBook: AbstentionBook, imageAbstentionBook: AbstentionBook;
  try {
    ({ store: tasks, book: taskBook, abstentionBook, imageAbstentionBook } = openTasks({
      file: flags['tasks-file'],
      enabled: flags.tasks === 'on',
      abstention: { enabled: flags.abstention === 'on', defaultOption: flags['abstain-option'] },
      checkpoint: base.checkpoint,
      profile: renderer.profile,
      temperatures,
      headCheckpoint: head?.base.checkpoint,
      quantization: flags.quantization,
      imageFingerprint: images?.service.fingerprint,
    }));
    if (images) images.service.context.abstentions = imageAbstentionBook;
  } catch (e) {
    engine.stop();
    head?.engine.stop();
    images?.engine.stop();
    throw new Error(`--tasks-file ${flags['tasks-file']}: cannot be read as a tasks file (${(e as Error).message}); it is left as it is`);
  }
  for (const r of tasks.refused) logger.warn(`WARNING: ${refusalLine(r)}`);
  const service: Service = {
    base,
    tasks,
    taskBook,
    distributions: taskBook,
    abstentionBook,
    abstentions: abstentionBook,
    headEngine: head && { engine: head.engine, renderer: head.renderer },
    headEngineReport: head
      ? {
          engine: 'second engine process (--head-engine)',
          base: head.base.profile.name,
          checkpoint: head.base.checkpoint,
          architecture: head.engine.info.architecture,
          dtype: head.engine.info.dtype,
          pid: head.engine.pid,
          tap: HIDDEN_TAP,
          hidden_size: head.engine.info.hiddenSize,
        }
      : { engine: 'serving engine', tap: HIDDEN_TAP, hidden_size: engine.info.hiddenSize },
    servedName,
    images: images?.service,
    renderer,
    temperatures,
    engine,
    cacheReport: () => engine.cacheReport(),
    engineInfo: engine.info,
    engineProcess: { pid: engine.pid, where: `child process ${engine.pid} of server ${process.pid}` },
    debugReadout: flags['debug-readout'],
    corsOrigin: flags['cors-origin'],
    inflight: new InFlight(),
    startedAt: new Date(),
  };
  if (engine.info.dtypeNote) logger.warn(`WARNING: ${engine.info.dtypeNote}`);
  const engines: EngineSource[] = [{ engine: 'text', client: engine }];
  if (head) engines.push({ engine: 'head', client: head.engine });
  if (images) engines.push({ engine: 'image', client: images.engine });
  return { service, engines };
}
