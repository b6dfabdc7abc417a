/**
 * Start-up's second step, while the engine processes load (start-engines.ts): the renderers, the tasks,
 * and the Service the routes share, once the engines are up. On failure every engine is stopped,
 * started or still starting.
 */
import { ResolvedBase } from '../config/bases';
import { Flags } from '../config/flags';
import { rendererFor, temperaturesOf } from '../config/profile-flags';
import { Temperatures } from '../rendering/profile';
import { Renderer } from '../rendering/renderer';
import { HIDDEN_TAP } from '../tasks/fingerprint';
import { openTasks } from '../tasks/open';
import { refusalLine } from '../tasks/store';
import { EngineClient, StartingEngine } from './engine-process/client';
import { EngineGroup } from './engine-process/group';
import { imageService } from './service/image-engine';
import { InFlight } from './service/inflight';
import { Logger } from './ops/logger';
import { EngineSource } from './ops/metrics';
import { ImageService, Service } from './service/service';
import { StartingEngines } from './start-engines';

export interface Loaded {
  service: Service;
  /** Every engine process started, by role: for /metrics and for the drain to stop. */
  engines: EngineSource[];
}

interface HeadEngine {
  base: ResolvedBase;
  renderer: Renderer;
  engine: EngineClient;
}

/** --head-engine: a second engine process, its own model and renderer, read for intent heads' hidden states. */
async function headEngine(starting: StartingEngine, flags: Flags, started: EngineSource[]): Promise<HeadEngine> {
  const renderer = await rendererFor(starting.base, flags);
  const engine = await starting.client;
  started.push({ engine: 'head', client: engine });
  return { base: starting.base, renderer, engine };
}

/** Where intent heads' hidden states come from, as /health and GET /v1/tasks report it. */
function headEngineReport(head: HeadEngine | undefined, serving: EngineGroup): Record<string, unknown> {
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

export async function loadService(flags: Flags, logger: Logger, engines: StartingEngines): Promise<Loaded> {
  const { base } = engines.text;
  if (base.note) logger.warn(`WARNING: ${base.note}`);
  const started: EngineSource[] = [];
  try {
    const renderer = await rendererFor(base, flags);
    const engine = await engines.text.group;
    // Each member by a getter: a restarted engine is a new client.
    const several = engine.members.length > 1;
    for (const m of engine.members) started.push({ engine: 'text', ...(several ? { index: m.index } : {}), get client() { return m.client; } });
    const head = engines.head && (await headEngine(engines.head, flags, started));
    const servedName = flags['served-name'] ?? base.profile.servedName;
    let images: ImageService | undefined;
    if (engines.image) {
      const image = await imageService(engines.image, flags, servedName);
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
      abstentions: abstentionBook,
      headEngine: head && { engine: head.engine, renderer: head.renderer },
      headEngineReport: headEngineReport(head, engine),
      servedName,
      images,
      renderer,
      temperatures,
      engine,
      engineInfo: engine.info,
      // The first engine's process, now (a restarted engine is a new one); /health's `engines` lists them all.
      get engineProcess() {
        const { pid } = engine.members[0].client;
        return { pid, where: `child process ${pid} of server ${process.pid}` };
      },
      debugReadout: flags['debug-readout'],
      cacheSaltHeader: flags['cache-salt-header'],
      corsOrigin: flags['cors-origin'],
      inflight: new InFlight(),
      startedAt: new Date(),
    };
    return { service, engines: started };
  } catch (e) {
    engines.stopAll();
    throw e;
  }
}
