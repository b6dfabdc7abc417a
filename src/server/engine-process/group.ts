/**
 * The serving model's engine processes behind one address (`--engines N`, or one per device of `--device
 * cuda:0,cuda:1`; docs/operations.md, "Several engines"). Each engine keeps its own prefix cache, so a state
 * asked again must reach the engine that computed it:
 *
 * - **Affinity from the request itself.** A call's key is its `X-State-Key` header when the client sends one,
 *   else its first AFFINITY_TOKENS state tokens (the rendered prompt's template and the state's beginning):
 *   the same state, and a state that grows by appending, keep their engine. The key (with the cache salt,
 *   which separates prefixes anyway) is placed on a hash ring of VIRTUAL_NODES points per engine, so an
 *   engine that is down passes only its own keys to the next engine on the ring.
 * - **Spilling.** When the engine a key belongs to has SPILL_DEPTH calls outstanding and another has fewer,
 *   the call goes to the least busy one: a cold prefix there costs less than waiting behind a deep queue.
 * - **Deaths.** An engine's death fails only its own calls in flight (503 with `Retry-After`); the engine is
 *   started again (after RESTART_DELAYS_MS, longer each time it dies soon after a start) while the others
 *   answer. With one engine there is nothing to answer meanwhile: its death is the server's (exit 70,
 *   server/main.ts), as before.
 */
import { createHash } from 'crypto';
import { EngineCall, EngineDeadError, EngineLike, EngineReply } from '../../answering/engine-like';
import { NativeEngineInfo } from '../../engine/native';
import { EngineClient } from './client';
import { CacheReport, HostArgs } from './protocol';

export const AFFINITY_TOKENS = 256;
/** Outstanding calls at which an engine's new calls spill to the least busy engine: deeper than the merged batches of the serving benchmark's 64 clients (mean 9.2 on an H200). */
export const SPILL_DEPTH = 16;
const VIRTUAL_NODES = 64;
/** Waits before each restart of an engine that died within STABLE_MS of its start; reset once it stays up. */
export const RESTART_DELAYS_MS = [0, 1000, 5000, 30000];
const STABLE_MS = 60_000;

export interface EngineMember {
  index: number;
  /** The device it runs on (`--device`'s entry). */
  device: string;
  client: EngineClient;
  /** Calls sent and not yet answered. */
  outstanding: number;
  restarts: number;
  startedAt: number;
  /** Dead, and being started again. */
  restarting: boolean;
}

export interface GroupEvents {
  /** The last engine died, or the only one did: the server cannot answer. */
  allDead(reason: string): void;
  died(member: EngineMember, reason: string): void;
  restarted(member: EngineMember): void;
  restartFailed(member: EngineMember, error: Error): void;
}

/** A 32-bit point on the ring. */
function point(...parts: (string | Uint8Array)[]): number {
  const h = createHash('sha1');
  for (const p of parts) h.update(p).update('\0');
  return h.digest().readUInt32BE(0);
}

export class EngineGroup implements EngineLike {
  private readonly ring: { at: number; member: number }[];
  private stopping = false;

  private constructor(readonly members: EngineMember[], private readonly args: HostArgs[], private readonly events: GroupEvents) {
    this.ring = members
      .flatMap((m) => Array.from({ length: VIRTUAL_NODES }, (_, v) => ({ at: point(`engine ${m.index}`, String(v)), member: m.index })))
      .sort((a, b) => a.at - b.at);
  }

  /** Starts one engine process per entry of `args` and waits until every one has loaded. */
  static async start(args: HostArgs[], devices: string[], events: GroupEvents): Promise<EngineGroup> {
    let group: EngineGroup | undefined;
    const onDeath = (index: number) => (reason: string) => group?.memberDied(index, reason);
    const started = args.map((a, i) => EngineClient.start(a, (reason) => onDeath(i)(reason)));
    started.forEach((p) => p.catch(() => undefined));
    let clients: EngineClient[];
    try {
      clients = await Promise.all(started);
    } catch (e) {
      for (const p of started) p.then((c) => c.stop(), () => undefined);
      throw e;
    }
    const now = Date.now();
    group = new EngineGroup(clients.map((client, index) => ({ index, device: devices[index], client, outstanding: 0, restarts: 0, startedAt: now, restarting: false })), args, events);
    // One that died while the others still loaded.
    for (const c of clients) if (!c.up) group.memberDied(clients.indexOf(c), c.deathReason!);
    return group;
  }

  get contextLimit(): number {
    return this.members[0].client.contextLimit;
  }

  /** The model as loaded: every engine loads the same one. */
  get info(): NativeEngineInfo {
    return this.members[0].client.info;
  }

  answer(call: EngineCall, cancel?: AbortSignal): Promise<EngineReply> {
    const m = this.route(call);
    m.outstanding++;
    return m.client
      .answer(call, cancel)
      .then((reply) => (this.members.length > 1 ? { ...reply, engine: m.index } : reply))
      .catch((e) => {
        if (!(e instanceof EngineDeadError) || this.members.length === 1) throw e;
        throw new EngineDeadError(`engine ${m.index} of ${this.members.length} died while this request was in flight (${e.message}); the others answer: send it again`);
      })
      .finally(() => m.outstanding--);
  }

  /** The engine a call goes to: its key's on the ring, unless that one queues SPILL_DEPTH deep. */
  route(call: EngineCall): EngineMember {
    const up = this.members.filter((m) => m.client.up);
    if (up.length <= 1) return up[0] ?? this.members[0];
    const owner = this.members[this.owner(call)];
    const leastBusy = up.reduce((a, b) => (b.outstanding < a.outstanding ? b : a));
    return owner.outstanding >= SPILL_DEPTH && leastBusy.outstanding < owner.outstanding ? leastBusy : owner;
  }

  /** The index of the first live engine clockwise from the call's key. */
  private owner(call: EngineCall): number {
    const key = call.stateKey !== undefined
      ? point('key', call.cacheSalt ?? '', call.stateKey)
      : point('tokens', call.cacheSalt ?? '', new Uint8Array(Int32Array.from(call.state.slice(0, AFFINITY_TOKENS)).buffer));
    let lo = 0, hi = this.ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.ring[mid].at < key) lo = mid + 1;
      else hi = mid;
    }
    for (let i = 0; i < this.ring.length; i++) {
      const { member } = this.ring[(lo + i) % this.ring.length];
      if (this.members[member].client.up) return member;
    }
    return this.ring[lo % this.ring.length].member;
  }

  /** The prefix caches' and the processes' figures, summed over the engines that are up. */
  async cacheReport(): Promise<CacheReport> {
    const reports = await this.memberReports();
    const live = reports.filter((r): r is CacheReport => r !== undefined);
    if (!live.length) throw new EngineDeadError(this.members[0].client.deathReason ?? 'every engine process is down');
    return { stats: sum(live.map((r) => r.stats)), boundaries: sum(live.map((r) => r.boundaries)), memory: sum(live.map((r) => r.memory)) };
  }

  /** Each engine's own report, undefined for one that is down. */
  memberReports(): Promise<(CacheReport | undefined)[]> {
    return Promise.all(this.members.map((m) => (m.client.up ? m.client.cacheReport().catch(() => undefined) : undefined)));
  }

  /** Stops every engine, and starts none again (the drain). */
  stop() {
    this.stopping = true;
    for (const m of this.members) m.client.stop();
  }

  private memberDied(index: number, reason: string) {
    const m = this.members[index];
    if (this.stopping) return;
    if (this.members.length === 1) return this.events.allDead(reason);
    this.events.died(m, reason);
    m.restarting = true;
    this.restart(m);
  }

  private restart(m: EngineMember) {
    const soon = Date.now() - m.startedAt < STABLE_MS;
    const delay = RESTART_DELAYS_MS[Math.min(soon ? m.restarts : 0, RESTART_DELAYS_MS.length - 1)];
    setTimeout(() => {
      if (this.stopping) return;
      EngineClient.start(this.args[m.index], (reason) => this.memberDied(m.index, reason)).then(
        (client) => {
          if (this.stopping) return client.stop();
          Object.assign(m, { client, restarting: false, startedAt: Date.now(), restarts: m.restarts + 1 });
          this.events.restarted(m);
        },
        (e: Error) => {
          m.restarts++;
          this.events.restartFailed(m, e);
          this.restart(m);
        },
      );
    }, delay).unref();
  }
}

/** Flat records of numbers, added field by field. */
function sum<T extends object>(records: T[]): T {
  const out = { ...records[0] } as Record<string, unknown>;
  for (const r of records.slice(1))
    for (const [k, v] of Object.entries(r)) if (typeof v === 'number') out[k] = (out[k] as number) + v;
  return out as T;
}
