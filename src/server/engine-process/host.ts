/**
 * The engine process: loads the model and runs the server's calls in arrival
 * order, reporting how long each waited. Calls that queue up while the engine
 * is busy are merged into one forward pass, up to --batch-tokens tokens
 * (requests with the same state share its computation). With --calls-in-flight
 * 2 the engine is handed the next job while one runs (its thread launches a
 * call before it finishes the one before). With --register-boundary after, a
 * reply's state boundary is registered right after the reply is sent: next in
 * line when nothing else is waiting, else behind the waiting requests
 * (deferred), so they never wait behind it. A request that arrives while a
 * registration is queued or running is flagged as having waited behind it.
 * A call still queued when the server cancels it (its clients have gone) is dropped.
 * Once after start, when the engine is idle, the CPU kernels' level is measured again
 * (Engine.remeasureLevel: the level is a matter of speed alone, docs/engine.md "Which level runs"),
 * and again later while the measurements find the machine busy; the server is sent the new info.
 */
import { Engine } from '../../engine/engine';
import { isEngineError, NativeImage } from '../../engine/native';
import type { Registry } from 'prom-client';
import { Family } from '../../common/prom-text';
import { EngineCall, WireError } from '../../answering/engine-like';
import { BoundaryCounters, HostArgs, HostMessage, MetricsReport, ServerMessage, WireCall } from './protocol';
import { ChannelEndpoint, ChannelWire, channelRings, RING_BYTES } from './channel';
import { hostAddon } from '../../common/host-addon';
import { loadSharp } from '../../images/sharp';
import { closeSync } from 'fs';

/**
 * This process's default metrics (CPU, memory, event loop, GC), relayed to the server's /metrics. Like the image
 * decoder (sharp), prom-client is loaded once the model is: before, it would delay the model's load, which is what
 * start-up waits for (server/start-engines.ts).
 */
let processMetrics: Promise<Registry> | undefined;
function collectProcessMetrics() {
  processMetrics = import('prom-client').then(({ collectDefaultMetrics, Registry }) => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    return registry;
  });
}

/** The image decoder (sharp), loaded once: at ready for an image engine, never for a text one. */
let decoder: Promise<typeof import('../../images/decode')> | undefined;
const imageDecoder = () => (decoder ??= import('../../images/decode'));

function toWire(e: unknown): WireError {
  if (isEngineError(e)) return { code: e.code, message: e.message, details: e.details ?? {} };
  return { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e), details: {} };
}

/** The channel to the server (opened first thing in main). */
let channel: ChannelEndpoint<HostMessage, ServerMessage>;
const send = (m: HostMessage) => channel.send(m);

/** The channel to the server: its rings in the memory the server shared (CHANNEL_FD), or the IPC pipe alone without it. */
function openChannel(args: HostArgs, busy: () => boolean, receive: (m: ServerMessage) => void) {
  const buffer = args.channelFd === undefined ? undefined : hostAddon()!.mapSharedMemory(args.channelFd, 2 * RING_BYTES);
  if (args.channelFd !== undefined) closeSync(args.channelFd);
  // Dropped once the server has gone (the 'disconnect' handler then ends this process).
  channel = new ChannelEndpoint(buffer && channelRings(buffer, 'engine'), (wire) => process.connected && process.send!(wire), receive, { busyPollMs: args.busyPollMs, busy });
  process.on('message', (wire: ChannelWire<ServerMessage>) => channel.receive(wire));
  // The server can go between `process.connected` and the pipe's write: the write then fails later, as an 'error'
  // event on the process (EPIPE), which unhandled would crash this process loudly. It is ending anyway.
  process.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE' && e.code !== 'ERR_IPC_CHANNEL_CLOSED') throw e;
  });
}

type QueuedWork =
  | { kind: 'answer'; id: number; call: NativeCall; arrived: number; queuedBehind: boolean; behindRegistration: boolean; decodeMs: number }
  | { kind: 'register'; ticket: number }
  | { kind: 'cache'; id: number }
  | { kind: 'level' };

/** The level is measured again this long after start (TQ_REMEASURE_LEVEL_AFTER_MS), then, while the machine is found busy, after twice as long, up to REMEASURE_TRIES times. */
const REMEASURE_AFTER_MS = Number(process.env.TQ_REMEASURE_LEVEL_AFTER_MS ?? 10_000);
const REMEASURE_TRIES = 6;
/** How long an idle wait for the level's turn retries, while calls keep the engine busy. */
const IDLE_POLL_MS = 1000;

/** A call as the addon takes it: an image engine's images decoded. */
type NativeCall = Omit<WireCall, 'images'> & { images?: NativeImage[] };

/** The engine process's scheduler: its queue of calls, merged into batches, with registrations and cancellations in their turn. */
class CallScheduler {
  private queue: QueuedWork[] = [];
  /**
   * Jobs handed to the engine and not yet done, at most callsInFlight (--calls-in-flight). With 2 the engine has the
   * next call while the device runs one, and launches it at once (csrc/addon/engine_thread.h); with 1 each job
   * waits for the one before.
   */
  private inFlight: QueuedWork[] = [];
  /** The level's re-measurements left, and the delay before the last one scheduled. */
  private levelTries = 0;
  private levelDelayMs = 0;
  readonly boundaries: BoundaryCounters = { pending: 0, deferred: 0, registered: 0, dropped: 0, failed: 0 };

  constructor(private engine: Engine, private batchTokens: number, private callsInFlight: number, private images?: HostArgs['images']) {}

  /** An answer call running: the channel keeps spinning meanwhile (for the calls that will join the next batch, and the server's next). */
  get busy(): boolean {
    return this.inFlight.some((j) => j.kind === 'answer');
  }

  receive(m: ServerMessage) {
    if (m.kind === 'cancel') return this.cancel(m.id);
    if (m.kind === 'metrics') return this.sendMetrics(m.id);
    if (m.kind === 'cache') this.enqueue({ kind: 'cache', id: m.id });
    else if (m.call.images?.length) this.decodeThenQueue(m.id, m.call);
    else this.queueAnswer(m.id, m.call as NativeCall, 0);
  }

  private async sendMetrics(id: number) {
    // The caches' counters as of the end of the last call: /metrics never waits for the engine thread.
    const caches = this.engine.cachesAfterLastCall();
    const report: MetricsReport = {
      process: (await (await processMetrics!).getMetricsAsJSON()) as unknown as Family[],
      queued: this.queue.filter((j) => j.kind === 'answer').length,
      running: this.busy,
      overlapped: this.engine.callsOverlapped(),
      ...(caches && { stats: caches.stats, vision: this.engine.info.vision ? caches.vision : undefined }),
      boundaries: { ...this.boundaries },
    };
    send({ kind: 'metrics', id, report });
  }

  private cancel(id: number) {
    const at = this.queue.findIndex((j) => j.kind === 'answer' && j.id === id);
    if (at < 0) return;
    this.queue.splice(at, 1);
    send({ kind: 'dropped', id });
  }

  /** An image engine decodes a call's images (in libuv's pool, beside the engine's work); the call queues once they are. */
  private async decodeThenQueue(id: number, call: WireCall) {
    const started = performance.now();
    const { decodeImages, ImageDecodeError } = await imageDecoder();
    try {
      if (!this.images) throw new Error('this engine has no image recipe: it is not an image engine');
      const images = await decodeImages(call.images!, this.images.budget, this.images.model, call.cacheSalt);
      this.queueAnswer(id, { ...call, images }, performance.now() - started);
    } catch (e) {
      const error: WireError = e instanceof ImageDecodeError ? { code: 'IMAGE_UNREADABLE', message: e.message, details: { image: e.index } } : toWire(e);
      send({ kind: 'error', id, error });
    }
  }

  private queueAnswer(id: number, call: NativeCall, decodeMs: number) {
    const ahead = [...this.inFlight, ...this.queue];
    const behind = ahead.some((j) => j.kind === 'register');
    this.enqueue({ kind: 'answer', id, call, arrived: performance.now(), queuedBehind: ahead.length > 0, behindRegistration: behind, decodeMs });
  }

  private enqueue(job: QueuedWork) {
    this.queue.push(job);
    this.pump();
  }

  /** Hands the engine the queued jobs it has room for. The level is measured with nothing else in flight (its rates would count their work). */
  private pump() {
    while (this.queue.length && this.inFlight.length < this.callsInFlight && !this.inFlight.some((j) => j.kind === 'level')) {
      if (this.queue[0].kind === 'level' && this.inFlight.length) return;
      void this.run(this.queue.shift()!);
    }
  }

  private async run(job: QueuedWork) {
    this.inFlight.push(job);
    try {
      if (job.kind === 'answer') await this.answer([job, ...this.takeBatch(job)]);
      else if (job.kind === 'register') await this.register(job.ticket);
      else if (job.kind === 'level') await this.remeasureLevel();
      else {
        const { rss, heapTotal } = process.memoryUsage();
        const memory = { ...(await this.engine.memoryStats()), rssBytes: rss, jsHeapBytes: heapTotal };
        const vision = this.engine.info.vision ? await this.engine.visionCacheStats() : undefined;
        send({ kind: 'cache', id: job.id, report: { stats: await this.engine.cacheStats(), vision, boundaries: { ...this.boundaries }, memory } });
      }
    } finally {
      this.inFlight.splice(this.inFlight.indexOf(job), 1);
      setImmediate(() => this.pump());
    }
  }

  /** Further queued answer calls that fit in the batch with `first`. */
  private takeBatch(first: Extract<QueuedWork, { kind: 'answer' }>): Extract<QueuedWork, { kind: 'answer' }>[] {
    const size = (j: Extract<QueuedWork, { kind: 'answer' }>) => j.call.state.length + j.call.questions.reduce((s, q) => s + q.tokens.length, 0);
    let tokens = size(first);
    const batch: Extract<QueuedWork, { kind: 'answer' }>[] = [];
    while (this.queue[0]?.kind === 'answer' && tokens + size(this.queue[0]) <= this.batchTokens) {
      const next = this.queue.shift() as Extract<QueuedWork, { kind: 'answer' }>;
      tokens += size(next);
      batch.push(next);
    }
    return batch;
  }

  private async answer(jobs: Extract<QueuedWork, { kind: 'answer' }>[]) {
    const started = performance.now();
    let results;
    try {
      results = await this.engine.answerBatch(jobs.map((j) => j.call));
    } catch (e) {
      if (jobs.length === 1) return send({ kind: 'error', id: jobs[0].id, error: toWire(e) });
      // One bad request fails a batch: answer each alone, so only it gets the error.
      for (const j of jobs) await this.answer([j]);
      return;
    }
    const engineMs = performance.now() - started;
    jobs.forEach((job, i) => {
      const r = results[i];
      send({
        kind: 'reply',
        id: job.id,
        reply: {
          answers: r.answers,
          stateTokens: r.stateTokens,
          cachedTokens: r.cachedTokens,
          computedTokens: r.computedTokens,
          timing: {
            ...r.timing,
            engineMs,
            // Time queued behind other work: a call that found the engine idle started at once, and the instant this
            // process took to hand it over (longer on a busy machine) is part of the hop, as each process's waking is.
            waitMs: job.queuedBehind ? started - job.arrived : 0,
            decodeMs: job.decodeMs,
            waitedBehindRegistration: job.behindRegistration,
            batchSize: jobs.length,
            overlapped: r.overlapped,
          },
        },
      });
    });
    // The boundaries are queued before anything is awaited: a request for the same state arriving meanwhile (a client's
    // retry just after its answer) then queues behind its registration and finds the state cached, instead of
    // deferring it and computing the whole state again.
    for (const r of results) {
      if (r.boundaryTicket < 0) continue;
      if (this.queue.some((j) => j.kind === 'answer')) {
        this.boundaries.deferred++;
        this.queue.push({ kind: 'register', ticket: r.boundaryTicket });
      } else {
        this.boundaries.pending++;
        this.queue.unshift({ kind: 'register', ticket: r.boundaryTicket });
      }
    }
  }

  /** Schedules a re-measurement of the level `delayMs` from now, run when nothing is running or queued. */
  remeasureLevelAfter(delayMs: number, tries = REMEASURE_TRIES) {
    const how = this.engine.info.levelChoice?.how;
    if (tries <= 0 || (how !== 'measured' && how !== 'cached' && how !== 're-measured')) return;
    this.levelTries = tries;
    this.levelDelayMs = delayMs;
    const whenIdle = () => {
      if (this.inFlight.length || this.queue.length) setTimeout(whenIdle, IDLE_POLL_MS).unref();
      else this.enqueue({ kind: 'level' });
    };
    setTimeout(whenIdle, delayMs).unref();
  }

  private async remeasureLevel() {
    let info;
    try {
      info = await this.engine.remeasureLevel();
    } catch (e) {
      // The level stays as it was (its answers are the same bits); the engine serves on.
      return console.error(`tqserve engine: measuring the kernel level again failed: ${toWire(e).message}`);
    }
    send({ kind: 'info', info });
    if (info.levelChoice?.busy) this.remeasureLevelAfter(this.levelDelayMs * 2, this.levelTries - 1);
  }

  private async register(ticket: number) {
    try {
      (await this.engine.registerBoundary(ticket)) ? this.boundaries.registered++ : this.boundaries.dropped++;
    } catch {
      this.boundaries.failed++;
    }
  }
}

async function main() {
  const args: HostArgs = JSON.parse(process.argv[2]);
  // The server going away ends the engine too, loading or serving: nothing is left to answer. By a signal, as the
  // server stops an engine (client.ts): process.exit runs libtorch's static destructors, and its thread pool's waited
  // forever, now and then, for a worker the engine's load had just started (a server stopped while its engine loads).
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  let scheduler: CallScheduler | undefined;
  // The server sends nothing before 'ready'.
  openChannel(args, () => scheduler?.busy ?? false, (m) => scheduler!.receive(m));
  let engine: Engine;
  try {
    engine = await Engine.open(args.load);
  } catch (e) {
    send({ kind: 'fatal', error: toWire(e) });
    process.exit(1);
  }
  // Beside a GPU the engine's thread spins as long as this side does (a call finding it asleep waits for its wake-up).
  // On the CPU it is a thread that computes: spinning, it took a core from the channel's spinners (bench/README.md,
  // "The engine thread's spin").
  if (engine.info.device.mode === 'cuda') engine.setBusyPoll(args.busyPollMs);
  send({ kind: 'ready', info: engine.info });
  collectProcessMetrics();
  if (args.images) void imageDecoder().then(loadSharp); // now rather than by the first image
  scheduler = new CallScheduler(engine, args.batchTokens, args.callsInFlight, args.images);
  scheduler.remeasureLevelAfter(REMEASURE_AFTER_MS);
}

main();
