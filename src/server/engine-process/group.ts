/**
 * The serving model's engine processes behind one address (`--engines N`, or one per device of `--device
 * cuda:0,cuda:1`; docs/operations.md, "Several engines"). Each engine keeps its own prefix cache, so a state
 * asked again must reach the engine that computed it:
 *
 * - **Affinity from the request itself** (affinity.ts). A call's key is its `X-State-Key` header when the
 *   client sends one, else its first state tokens (the rendered prompt's template and the state's beginning):
 *   the same state, and a state that grows by appending, keep their engine. The key (with the cache salt,
 *   which separates prefixes anyway) is placed on a hash ring, so an engine that is down passes only its own
 *   keys to the next engine on the ring.
 * - **Spilling.** When the engine a key belongs to has a deep queue of calls outstanding and another has
 *   fewer, the call goes to the least busy one: a cold prefix there costs less than waiting behind the queue.
 * - **Deaths.** An engine's death fails only its own calls in flight (503 with `Retry-After`); the engine is
 *   started again (after RESTART_DELAYS_MS, longer each time it dies soon after a start) while the others
 *   answer. With one engine there is nothing to answer meanwhile: its death is the server's (exit 70,
 *   server/main.ts), as before.
 */
import { EngineCall, EngineDeadError, EngineLike, EngineReply } from '../../answering/engine-like';
import { NativeEngineInfo } from '../../engine/native';
import { affinityPoint, AffinityRing, withSpill } from './affinity';
import { EngineClient } from './client';
import { EngineStart, sizedAs } from './device-shares';
import { CacheReport, HostArgs } from './protocol';

/** The wait before an engine's restart, by its restarts so far, while it dies within STABLE_MS of its start; none after a stable run. */
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
}

export interface GroupEvents {
  /** The engine of a group of one died: the server cannot answer (exit 70, server/main.ts). */
  allDead(reason: string): void;
  died(member: EngineMember, reason: string): void;
  restarted(member: EngineMember): void;
  restartFailed(member: EngineMember, error: Error): void;
}

export class EngineGroup implements EngineLike {
  private readonly ring: AffinityRing;
  private stopping = false;

  private constructor(readonly members: EngineMember[], private readonly args: HostArgs[], private readonly events: GroupEvents) {
    this.ring = new AffinityRing(members.length);
  }

  /**
   * Starts one engine process per entry of `starts` and waits until every one has loaded: together, save one that
   * follows another (by index here: its device's first, whose budget it takes once that one has started; device-shares.ts).
   */
  static async start(starts: EngineStart<HostArgs>[], devices: string[], events: GroupEvents): Promise<EngineGroup> {
    let group: EngineGroup | undefined;
    const launch = (i: number, a: HostArgs) => EngineClient.start(a, (reason) => group?.memberDied(i, reason));
    const kept = starts.map((s) => s.args);  // what each restarts with
    const started: Promise<EngineClient>[] = [];
    starts.forEach((s, i) => {
      const first = s.follows;
      if (first === undefined) {
        started[i] = launch(i, s.args);
        return;
      }
      started[i] = started[first].then((client) => {
        kept[first] = sizedAs(starts[first].args, client.info);  // a restart of the first finds the others' memory taken
        kept[i] = sizedAs(s.args, client.info);
        return launch(i, kept[i]);
      });
    });
    started.forEach((p) => p.catch(() => undefined));
    let clients: EngineClient[];
    try {
      clients = await Promise.all(started);
    } catch (e) {
      for (const p of started) p.then((c) => c.stop(), () => undefined);
      throw e;
    }
    const now = Date.now();
    group = new EngineGroup(clients.map((client, index) => ({ index, device: devices[index], client, outstanding: 0, restarts: 0, startedAt: now })), kept, events);
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

  /** The engine a call goes to: its affinity key's on the ring, unless that one queues too deep (affinity.ts). */
  route(call: EngineCall): EngineMember {
    if (this.members.length === 1) return this.members[0];
    const up = (i: number) => this.members[i].client.up;
    const owner = this.ring.owner(affinityPoint(call), up);
    return this.members[withSpill(owner, this.members.map((m) => m.outstanding), up)];
  }

  /** The prefix caches' and the processes' figures, summed over the engines that are up. */
  async cacheReport(): Promise<CacheReport> {
    return this.summed(await this.memberReports());
  }

  /** `memberReports`' figures summed over the engines that answered (/health reads both, asking each engine once). */
  summed(reports: (CacheReport | undefined)[]): CacheReport {
    const live = reports.filter((r): r is CacheReport => r !== undefined);
    if (!live.length) throw new EngineDeadError(this.members[0].client.deathReason ?? 'every engine process is down');
    return { stats: sum(live.map((r) => r.stats)), boundaries: sum(live.map((r) => r.boundaries)), memory: sum(live.map((r) => r.memory)) };
  }

  /** Each engine's own report, undefined for one that is down. */
  memberReports(): Promise<(CacheReport | undefined)[]> {
    return Promise.all(this.members.map((m) => (m.client.up ? m.client.cacheReport().catch(() => undefined) : undefined)));
  }

  /** Stops every engine, and starts none again (a start-up that failed elsewhere). The drain stops each engine's client: a stopped client's exit is no death, so nothing restarts either. */
  stop() {
    this.stopping = true;
    for (const m of this.members) m.client.stop();
  }

  private memberDied(index: number, reason: string) {
    const m = this.members[index];
    if (this.stopping) return;
    if (this.members.length === 1) return this.events.allDead(reason);
    this.events.died(m, reason);
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
          Object.assign(m, { client, startedAt: Date.now(), restarts: m.restarts + 1 });
          this.events.restarted(m);
        },
        (e: Error) => {
          // A failed start counts as one that died at once: the next waits longer.
          Object.assign(m, { startedAt: Date.now(), restarts: m.restarts + 1 });
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
