/**
 * The grace of a computation nobody waits for (src/server/service/inflight.ts): cancelled only when no client has come
 * back within DROP_GRACE_MS of the last one leaving. Timed by jest's clock, so the test waits on no real time.
 */
import { DROP_GRACE_MS, InFlight } from '../../src/server/service/inflight';

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

/** A computation that runs until the test ends it, and the cancel signal it was given. */
function pending() {
  const seen: { cancel?: AbortSignal; finish?: () => void } = {};
  const compute = (cancel: AbortSignal) => {
    seen.cancel = cancel;
    return new Promise<{ headers: Record<string, string>; body: string }>((resolve) => (seen.finish = () => resolve({ headers: {}, body: '{}' })));
  };
  return { seen, compute };
}

test('a client that comes back and leaves again starts its own grace: the first one ending does not cancel', async () => {
  const inflight = new InFlight();
  const { seen, compute } = pending();
  const first = new AbortController();
  const a = inflight.run('k', 'req_a', first.signal, compute);
  first.abort(); // the first client times out at once
  jest.advanceTimersByTime(DROP_GRACE_MS - 500);
  const second = new AbortController();
  const b = inflight.run('k', 'req_b', second.signal, compute); // its retry joins
  jest.advanceTimersByTime(400);
  second.abort(); // and times out too, 100 ms before the first grace ends
  jest.advanceTimersByTime(100);
  expect(seen.cancel!.aborted).toBe(false); // the first grace ended with a client gone for 100 ms only
  jest.advanceTimersByTime(DROP_GRACE_MS - 100);
  expect(seen.cancel!.aborted).toBe(true); // the second's grace ended with nobody back
  seen.finish!();
  await Promise.all([a, b]);
});

test('a computation whose clients are all gone for the grace is cancelled; one with a client is not', async () => {
  const inflight = new InFlight();
  const gone = pending(), kept = pending();
  const left = new AbortController(), staying = new AbortController();
  const a = inflight.run('gone', 'req_a', left.signal, gone.compute);
  const b = inflight.run('kept', 'req_b', staying.signal, kept.compute);
  left.abort();
  jest.advanceTimersByTime(DROP_GRACE_MS);
  expect(gone.seen.cancel!.aborted).toBe(true);
  expect(kept.seen.cancel!.aborted).toBe(false);
  gone.seen.finish!();
  kept.seen.finish!();
  await Promise.all([a, b]);
});
