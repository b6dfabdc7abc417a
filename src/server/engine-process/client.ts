/**
 * The server's side of the engine process: starts it, forwards calls, and
 * notices its death (every pending call then fails with EngineDeadError).
 */
import { ChildProcess, fork } from 'child_process';
import { closeSync } from 'fs';
import { ResolvedBase } from '../../config/bases';
import { siblingModule } from '../../common/sibling-module';
import { ClientGoneError, EngineCall, EngineCallError, EngineDeadError, EngineLike, EngineReply } from '../../answering/engine-like';
import { NativeEngineInfo } from '../../engine/native';
import { hostAddon } from '../../common/host-addon';
import { CHANNEL_FD, CacheReport, HostArgs, HostMessage, MetricsReport, ServerMessage, toWireCall, WireCall } from './protocol';
import { ChannelEndpoint, ChannelWire, channelRings, RING_BYTES } from './channel';

/** An engine process on its way: its base, and its client once the model is loaded (server/start-engines.ts). */
export interface StartingEngine {
  base: ResolvedBase;
  client: Promise<EngineClient>;
}

/**
 * glibc's malloc settings for the engine process, each where the operator's GLIBC_TUNABLES names none of that name:
 * - hugetlb=1: its heap backed by transparent huge pages. Loading libtorch and the weights fills the heap a page fault
 *   at a time, and a fault costs most under a VM; with 2 MiB pages where the kernel gives them on request (THP
 *   "madvise" or "always") the engine gets to ready sooner at about the same resident size (docs/running.md,
 *   "Start-up"). Where the kernel gives none, nothing changes.
 * - arena_max=1: every thread allocates from the main arena. The engine computes on a thread of its own, which glibc
 *   would give an arena of its own, whose heaps it unmaps as soon as a forward pass frees them, so that the next pass
 *   faults its activations in again; the main arena keeps them, as in tq_cli, whose engine runs on the main thread
 *   (bench/README.md, "The engine process's malloc arena").
 */
const ENGINE_TUNABLES: Record<string, string> = { 'glibc.malloc.hugetlb': '1', 'glibc.malloc.arena_max': '1' };

/** The engine process's environment: the server's, with ENGINE_TUNABLES added to GLIBC_TUNABLES where it does not name them. */
function engineProcessEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const given = (env.GLIBC_TUNABLES ?? '').split(':').filter(Boolean);
  const named = new Set(given.map((tunable) => tunable.split('=')[0]));
  const added = Object.entries(ENGINE_TUNABLES).filter(([name]) => !named.has(name)).map(([name, value]) => `${name}=${value}`);
  return { ...env, GLIBC_TUNABLES: [...given, ...added].join(':') };
}

export class EngineClient implements EngineLike {
  private nextId = 1;
  private pending = new Map<number, { resolve: (r: any) => void; reject: (e: Error) => void }>();
  deathReason?: string;
  private stopped = false;

  private constructor(private child: ChildProcess, private channel: ChannelEndpoint<ServerMessage, HostMessage>, readonly info: NativeEngineInfo) {}

  get contextLimit(): number {
    return this.info.contextLimit;
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Starts the engine process and waits until the model is loaded. */
  static start(args: HostArgs, onDeath: (reason: string) => void): Promise<EngineClient> {
    const host = siblingModule(__filename, 'host');
    // The channel's shared memory goes to the child as its fd CHANNEL_FD (a stdio slot); this process's fd closes once it has.
    const shared = hostAddon()?.createSharedMemory(2 * RING_BYTES);
    const child = fork(host.file, [JSON.stringify({ ...args, channelFd: shared && CHANNEL_FD })], {
      serialization: 'advanced',
      execArgv: host.execArgv,
      env: engineProcessEnv(),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc', ...(shared ? [shared.fd] : [])],
    });
    if (shared) closeSync(shared.fd);
    return new Promise((resolve, reject) => {
      let client: EngineClient | undefined;
      const channel = new ChannelEndpoint<ServerMessage, HostMessage>(
        shared && channelRings(shared.buffer, 'server'),
        (wire) => child.connected && child.send(wire),
        (m) => {
          if (m.kind === 'ready') {
            client = new EngineClient(child, channel, m.info);
            resolve(client);
          } else if (m.kind === 'fatal') {
            reject(new EngineCallError(m.error));
          } else {
            client?.settle(m);
          }
        },
        { busyPollMs: args.busyPollMs, busy: () => (client?.pending.size ?? 0) > 0 },
      );
      child.on('message', (wire: ChannelWire<HostMessage>) => channel.receive(wire));
      // A message sent after the process died and before its exit reached this one (`connected` still true) fails
      // with EPIPE as an 'error' event, which unheard would end the server: its exit, just behind, answers the calls
      // (the message's among them). Before it loaded, an error is its start's failure.
      child.on('error', (e) => {
        if (!client) reject(e);
      });
      child.on('exit', (code, signal) => {
        const reason = `the engine process exited (${signal ? `signal ${signal}` : `code ${code}`})`;
        if (!client) return reject(new Error(reason));
        client.deathReason = reason;
        for (const p of client.pending.values()) p.reject(new EngineDeadError(reason));
        client.pending.clear();
        // Stopped on purpose (the drain, a start-up that failed elsewhere): not a death.
        if (!client.stopped) onDeath(reason);
      });
    });
  }

  private settle(m: HostMessage) {
    if (m.kind === 'ready' || m.kind === 'fatal') return;
    // In place: /health and the service hold this object.
    if (m.kind === 'info') return void Object.assign(this.info, m.info);
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.kind === 'reply') p.resolve(m.reply);
    else if (m.kind === 'cache' || m.kind === 'metrics') p.resolve(m.report);
    else if (m.kind === 'dropped') p.reject(new ClientGoneError());
    else p.reject(new EngineCallError(m.error));
  }

  private call<T>(message: { kind: 'answer'; call: WireCall } | { kind: 'cache' } | { kind: 'metrics' }, cancel?: AbortSignal): Promise<T> {
    if (this.deathReason) return Promise.reject(new EngineDeadError(this.deathReason));
    if (cancel?.aborted) return Promise.reject(new ClientGoneError());
    const id = this.nextId++;
    const askToDrop = () => this.channel.send({ kind: 'cancel', id });
    cancel?.addEventListener('abort', askToDrop, { once: true });
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.channel.send({ ...message, id });
    }).finally(() => cancel?.removeEventListener('abort', askToDrop));
  }

  answer(call: EngineCall, cancel?: AbortSignal): Promise<EngineReply> {
    const sent = performance.now();
    return this.call<EngineReply>({ kind: 'answer', call: toWireCall(call) }, cancel).then((reply) => {
      const t = reply.timing;
      t.hopMs = Math.max(0, performance.now() - sent - t.waitMs - t.engineMs - (t.decodeMs ?? 0));
      return reply;
    });
  }

  /** The prefix cache's counters and the boundary registrations' (queued behind pending calls). */
  cacheReport(): Promise<CacheReport> {
    return this.call({ kind: 'cache' });
  }

  /** What /metrics reads of the engine process, answered at once (not queued behind the engine). */
  metricsReport(): Promise<MetricsReport> {
    return this.call({ kind: 'metrics' });
  }

  /** Whether the process is alive. */
  get up(): boolean {
    return !this.deathReason;
  }

  stop() {
    this.stopped = true;
    this.child.kill();
  }
}
