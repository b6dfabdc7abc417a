/**
 * 8 concurrent clients: requests merge into shared forward passes, and with --calls-in-flight 2 the engine launches a
 * call while the one before is unfinished; each answers as it would alone, bit for bit.
 */
import { RunningServer, startServer } from '../helpers/server';

const state = (i: number) => `Report ${i}: the ${['north', 'south', 'east', 'west'][i % 4]} depot shipped ${10 + i} boxes; ${i % 3} arrived damaged.`.repeat(1 + (i % 3));
const body = (i: number) => ({
  state: state(i % 5), // some clients share a state
  questions: [
    { kind: 'noul', instructions: 'Did anything arrive damaged?' },
    { kind: 'choice', instructions: 'Which depot?', options: ['north', 'south', 'east', 'west'] },
  ],
});

let server: RunningServer;
let reference: RunningServer;
beforeAll(async () => {
  [server, reference] = await Promise.all([startServer(['--calls-in-flight', '2']), startServer(['--batch-tokens', '0', '--prefix-cache', 'off'])]);
});
afterAll(async () => {
  await Promise.all([server.stop(), reference.stop()]);
});

test('8 clients x 6 requests, two calls in flight: every answer the unbatched, uncached bits; requests merged, and calls overlapped', async () => {
  const expected = new Map<number, number[][]>();
  for (let i = 0; i < 8; i++) expected.set(i, (await reference.post('/v1/answer', body(i))).body.answers.map((a: any) => a.logits));
  const batchSizes: number[] = [];
  const waits: number[] = [];
  let overlapped = 0;
  await Promise.all(
    Array.from({ length: 8 }, async (_, client) => {
      for (let k = 0; k < 6; k++) {
        const r = await server.post('/v1/answer', body(client));
        expect(r.status).toBe(200);
        batchSizes.push(r.body.timing.batch_size);
        waits.push(r.body.timing.waited_ms);
        overlapped += r.body.timing.overlapped_previous_call ? 1 : 0;
        expect(r.body.answers.map((a: any) => a.logits)).toEqual(expected.get(client));
      }
    }),
  );
  expect(Math.max(...batchSizes)).toBeGreaterThan(1);
  // Merged calls had queued behind the one running: their wait is counted.
  expect(Math.max(...waits)).toBeGreaterThan(0);
  expect(batchSizes).toHaveLength(48);
  // Launched behind an unfinished call: seen by its requests, and counted by /metrics (a merged call once).
  expect(overlapped).toBeGreaterThan(0);
  const metrics: string = (await server.get('/metrics')).body;
  const calls = Number(/^tqserve_engine_calls_overlapped_total\S* (\d+)$/m.exec(metrics)![1]);
  expect(calls).toBeGreaterThan(0);
  expect(calls).toBeLessThanOrEqual(overlapped);
});

test('the reference server (no merging) reports batches of one and never waits on an idle engine', async () => {
  const r = await reference.post('/v1/answer', body(1));
  expect(r.body.timing.batch_size).toBe(1);
  expect(r.body.timing.overlapped_previous_call).toBe(false);
  expect(r.body.timing.waited_ms).toBe(0);
});
