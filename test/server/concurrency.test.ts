/** 8 concurrent clients: requests merge into shared forward passes and answer as they would alone. */
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
  [server, reference] = await Promise.all([startServer(), startServer(['--batch-tokens', '0', '--prefix-cache', 'off'])]);
});
afterAll(async () => {
  await Promise.all([server.stop(), reference.stop()]);
});

test('8 clients x 6 requests: every answer equals the unbatched, uncached answer (fp32, 1e-6), and requests did merge', async () => {
  const expected = new Map<number, number[][]>();
  for (let i = 0; i < 8; i++) expected.set(i, (await reference.post('/v1/answer', body(i))).body.answers.map((a: any) => a.probabilities));
  const batchSizes: number[] = [];
  await Promise.all(
    Array.from({ length: 8 }, async (_, client) => {
      for (let k = 0; k < 6; k++) {
        const r = await server.post('/v1/answer', body(client));
        expect(r.status).toBe(200);
        batchSizes.push(r.body.timing.batch_size);
        r.body.answers.forEach((a: any, q: number) =>
          a.probabilities.forEach((p: number, j: number) => expect(Math.abs(p - expected.get(client)![q][j])).toBeLessThanOrEqual(1e-6)),
        );
      }
    }),
  );
  expect(Math.max(...batchSizes)).toBeGreaterThan(1);
  expect(batchSizes).toHaveLength(48);
});

test('the reference server (no merging) reports batches of one and never waits on an idle engine', async () => {
  const r = await reference.post('/v1/answer', body(1));
  expect(r.body.timing.batch_size).toBe(1);
  expect(r.body.timing.waited_ms).toBeLessThan(1);
});
