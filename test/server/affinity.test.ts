/**
 * The engine group's routing rule (src/server/engine-process/affinity.ts), on its own: keys from the state's first
 * tokens or X-State-Key, a ring that moves only a down engine's keys, and the spill away from a deep queue.
 */
import { AFFINITY_TOKENS, affinityPoint, AffinityRing, SPILL_DEPTH, withSpill } from '../../src/server/engine-process/affinity';

const tokens = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 7919 + i * 104729) % 150000);
const allUp = () => true;

test('a call\'s key: its first tokens (a longer state with the same start keeps it), or X-State-Key; the salt apart', () => {
  const state = tokens(1, 600);
  const grown = [...state, ...tokens(2, 300)];
  expect(affinityPoint({ state: grown })).toBe(affinityPoint({ state }));
  const changedEarly = state.slice();
  changedEarly[AFFINITY_TOKENS - 1] += 1;
  expect(affinityPoint({ state: changedEarly })).not.toBe(affinityPoint({ state }));
  expect(affinityPoint({ state: tokens(3, 50), stateKey: 'ticket-1' })).toBe(affinityPoint({ state: tokens(4, 900), stateKey: 'ticket-1' }));
  expect(affinityPoint({ state, cacheSalt: 'tenant-a' })).not.toBe(affinityPoint({ state, cacheSalt: 'tenant-b' }));
});

test('the ring spreads keys over the engines, and an engine that is down passes on only its own', () => {
  const ring = new AffinityRing(4);
  const keys = Array.from({ length: 4000 }, (_, i) => affinityPoint({ state: tokens(i, 40) }));
  const owners = keys.map((k) => ring.owner(k, allUp));
  const counts = [0, 1, 2, 3].map((e) => owners.filter((o) => o === e).length);
  for (const c of counts) expect(c).toBeGreaterThan(600); // a quarter is 1,000
  const without2 = keys.map((k) => ring.owner(k, (e) => e !== 2));
  keys.forEach((_, i) => {
    if (owners[i] === 2) expect(without2[i]).not.toBe(2);
    else expect(without2[i]).toBe(owners[i]);
  });
});

test('a call spills to the least busy live engine only once its own has SPILL_DEPTH outstanding', () => {
  expect(withSpill(0, [SPILL_DEPTH - 1, 0, 0], allUp)).toBe(0);
  expect(withSpill(0, [SPILL_DEPTH, 3, 1], allUp)).toBe(2);
  expect(withSpill(0, [SPILL_DEPTH, 3, 1], (e) => e !== 2)).toBe(1);
  expect(withSpill(1, [SPILL_DEPTH + 5, SPILL_DEPTH + 5], allUp)).toBe(1);
});
