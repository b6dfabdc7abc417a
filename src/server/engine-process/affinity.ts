/**
 * Which engine of a group a call goes to (group.ts): the call's affinity key on a hash ring, and the spill
 * away from a deep queue. Pure functions of the call and the engines' states, so that the rule is tested
 * on its own (test/server/affinity.test.ts) as well as through the server.
 */
import { createHash } from 'crypto';
import { EngineCall } from '../../answering/engine-like';

/** State tokens that make a call's key when the client sends no X-State-Key: the template and the state's beginning. */
export const AFFINITY_TOKENS = 256;
/** Outstanding calls at which an engine's new calls spill to the least busy engine: deeper than a merged step's batch under the serving benchmark's 64 clients (docs/gpu.md). */
export const SPILL_DEPTH = 16;
const VIRTUAL_NODES = 64;

/** A 32-bit point on the ring. */
function point(...parts: (string | Uint8Array)[]): number {
  const h = createHash('sha1');
  for (const p of parts) h.update(p).update('\0');
  return h.digest().readUInt32BE(0);
}

/** The call's place on the ring: its X-State-Key, else its first AFFINITY_TOKENS state tokens; with its cache salt. */
export function affinityPoint(call: Pick<EngineCall, 'state' | 'cacheSalt' | 'stateKey'>): number {
  if (call.stateKey !== undefined) return point('key', call.cacheSalt ?? '', call.stateKey);
  return point('tokens', call.cacheSalt ?? '', new Uint8Array(Int32Array.from(call.state.slice(0, AFFINITY_TOKENS)).buffer));
}

/** VIRTUAL_NODES points per engine: an engine that is down passes only its own keys on, to the next engine clockwise. */
export class AffinityRing {
  private readonly points: { at: number; engine: number }[];

  constructor(engines: number) {
    this.points = Array.from({ length: engines }, (_, engine) => Array.from({ length: VIRTUAL_NODES }, (_, v) => ({ at: point(`engine ${engine}`, String(v)), engine })))
      .flat()
      .sort((a, b) => a.at - b.at);
  }

  /** The first engine clockwise from `at` for which `up` holds (the first clockwise when none does). */
  owner(at: number, up: (engine: number) => boolean): number {
    let lo = 0, hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.points[mid].at < at) lo = mid + 1;
      else hi = mid;
    }
    for (let i = 0; i < this.points.length; i++) {
      const { engine } = this.points[(lo + i) % this.points.length];
      if (up(engine)) return engine;
    }
    return this.points[lo % this.points.length].engine;
  }
}

/** The engine to send to: the owner, unless it has SPILL_DEPTH calls outstanding and a live engine has fewer (the least busy). */
export function withSpill(owner: number, outstanding: number[], up: (engine: number) => boolean): number {
  if (outstanding[owner] < SPILL_DEPTH) return owner;
  let least = owner;
  outstanding.forEach((n, e) => {
    if (up(e) && n < outstanding[least]) least = e;
  });
  return least;
}
