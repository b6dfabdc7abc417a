/**
 * `npm start -- [flags]`: resolve the base, start the engine process, serve HTTP.
 * Exit codes: 0 after --help, 2 for a bad flag, 1 when start-up fails (bad base,
 * busy port), 70 after the engine process died.
 */
import * as os from 'os';
import { ModelTokenizer } from '../tokenizer/tokenizer';
import { Renderer } from '../rendering/renderer';
import { createApp } from './app';
import { ResolvedBase, resolveBase } from '../config/bases';
import { EngineClient } from './engine-process/client';
import { FlagError, Flags, helpText, parseFlags } from '../config/flags';
import { promptProfile, temperaturesOf } from '../config/profile-flags';
import { answerMalformedRequests } from './http/connection';
import { InFlight } from './inflight';
import { AbstentionBook } from '../abstention/book';
import { TaskBook } from '../tasks/apply';
import { HIDDEN_TAP } from '../tasks/fingerprint';
import { openTasks } from '../tasks/open';
import { TaskStore } from '../tasks/store';
import { Service } from './service';
import { startImageEngine } from './image-engine';

export const ENGINE_DEAD_EXIT = 70;

function log(message: string) {
  console.error(`[tqserve] ${message}`);
}

async function main() {
  let flags: Flags;
  try {
    flags = parseFlags(process.argv.slice(2));
  } catch (e) {
    if (e instanceof FlagError) {
      console.error(`tqserve: ${e.message}`);
      process.exit(2);
    }
    throw e;
  }
  if (flags.help) {
    console.log(helpText());
    return;
  }
  const base = resolveBase(flags.base as string, flags['models-dir'] as string);
  if (base.note) log(`WARNING: ${base.note}`);
  const temperatures = temperaturesOf(base.profile.temperatures, flags);
  const renderer = await Renderer.create(ModelTokenizer.load(base.checkpoint), promptProfile(base.profile.prompt, flags));
  const threads = (flags.threads as number) || os.cpus().length;

  let service: Service | undefined;
  const load = {
    path: base.checkpoint,
    dtype: flags.dtype as 'bf16' | 'fp32',
    threads,
    prefixCache: flags['prefix-cache'] === 'on',
    batchInvariant: flags['batch-invariant'] === 'on',
    device: flags.device as string,
    registerBoundary: flags['register-boundary'] as 'after' | 'before',
    cacheMiB: flags['cache-mib'] as number,
  };
  const died = (which: string) => (reason: string) => {
    const why = which + reason;
    log(`${why}: answering 503 and exiting with code ${ENGINE_DEAD_EXIT}`);
    if (service) service.deadReason = why;
    setTimeout(() => process.exit(ENGINE_DEAD_EXIT), flags['exit-grace-ms'] as number);
  };
  const batchTokens = flags['batch-tokens'] as number;
  const engine = await EngineClient.start({ load, batchTokens }, died(''));
  // --head-engine: a second engine process, its own model and renderer, read for intent heads' hidden states.
  let head: { base: ResolvedBase; renderer: Renderer; engine: EngineClient } | undefined;
  if (flags['head-engine']) {
    const headBase = resolveBase(flags['head-engine'] as string, flags['models-dir'] as string);
    const headRenderer = await Renderer.create(ModelTokenizer.load(headBase.checkpoint), promptProfile(headBase.profile.prompt, flags));
    head = { base: headBase, renderer: headRenderer, engine: await EngineClient.start({ load: { ...load, path: headBase.checkpoint }, batchTokens }, died('head engine (--head-engine): ')) };
  }
  const servedName = (flags['served-name'] as string | undefined) ?? base.profile.servedName;
  let images: Awaited<ReturnType<typeof startImageEngine>> | undefined;
  if (flags['image-model']) {
    try {
      images = await startImageEngine(flags, load, batchTokens, servedName, died('image engine (--image-model): '));
    } catch (e) {
      engine.stop();
      head?.engine.stop();
      throw e;
    }
    if (images.note) log(`WARNING: image model: ${images.note}`);
  }
  let tasks: TaskStore, taskBook: TaskBook, abstentionBook: AbstentionBook, imageAbstentionBook: AbstentionBook;
  try {
    ({ store: tasks, book: taskBook, abstentionBook, imageAbstentionBook } = openTasks({
      file: flags['tasks-file'] as string | undefined,
      enabled: flags.tasks === 'on',
      abstention: { enabled: flags.abstention === 'on', defaultOption: flags['abstain-option'] as string | undefined },
      checkpoint: base.checkpoint,
      profile: renderer.profile,
      temperatures,
      headCheckpoint: head?.base.checkpoint,
      imageFingerprint: images?.service.fingerprint,
    }));
    if (images) images.service.context.abstentions = imageAbstentionBook;
  } catch (e) {
    engine.stop();
    head?.engine.stop();
    images?.engine.stop();
    throw new Error(`--tasks-file ${flags['tasks-file']}: cannot be read as a tasks file (${(e as Error).message}); it is left as it is`);
  }
  for (const r of tasks.refusedAtStart) log(`WARNING: ${r.kind === 'abstention' ? 'abstention task' : 'task'} ${r.id} in --tasks-file refused: ${r.reason}`);
  service = {
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
    debugReadout: flags['debug-readout'] as boolean,
    corsOrigin: flags['cors-origin'] as string | undefined,
    inflight: new InFlight(),
    startedAt: new Date(),
  };
  if (engine.info.dtypeNote) log(`WARNING: ${engine.info.dtypeNote}`);
  const server = createApp(service).listen(flags.port as number, flags.host as string);
  answerMalformedRequests(server);
  server.on('listening', () => {
    const a = server.address();
    const where = typeof a === 'object' && a ? `${a.address}:${a.port}` : String(a);
    log(`serving ${service!.servedName} (${base.checkpoint}, ${engine.info.architecture}, ${engine.info.dtype}) on http://${where}`);
    if (images) log(`image route: ${images.service.base.checkpoint} (${images.engine.info.architecture}, ${images.engine.info.dtype}), at most ${images.service.maxTokens} tokens per image`);
  });
  server.on('error', (e: NodeJS.ErrnoException) => {
    log(e.code === 'EADDRINUSE' ? `port ${flags.port} on ${flags.host} is already in use` : `cannot listen: ${e.message}`);
    engine.stop();
    head?.engine.stop();
    images?.engine.stop();
    process.exit(1);
  });
}

main().catch((e) => {
  log(`start-up failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
