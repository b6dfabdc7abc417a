/**
 * A server that computes attention as a cascade (`--attention cascade`, the GPU's form: docs/gpu.md) over its CPU
 * reference answers as the default server does (fp32 label logits within 1e-5), and says which it runs. (That every
 * kernel level gives the same bits is test/engine/golden.test.ts's; that TQ_KERNELS forces a server's level,
 * test/kernels/level-choice.test.ts's.)
 */
import { maxAbsDiff } from '../helpers/reference';
import { startServer, RunningServer } from '../helpers/server';

const body = {
  state: 'The invoice of March was paid twice; the customer asked for a refund of the second payment. '.repeat(6),
  questions: [
    { kind: 'noul', instructions: 'Was the invoice paid twice?' },
    { kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] },
  ],
};

let direct: RunningServer, cascade: RunningServer;
beforeAll(async () => {
  // The direct form by its older name, still read.
  [direct, cascade] = await Promise.all([startServer(['--attention', 'kernels']), startServer(['--attention', 'cascade'])]);
});
afterAll(async () => Promise.all([direct, cascade].map((s) => s?.stop())));

test('a server with --attention cascade answers as the direct form does (fp32 logits within 1e-5), and each says which it runs', async () => {
  expect((await direct.get('/health')).body.attention).toBe('direct');
  expect((await cascade.get('/health')).body.attention).toBe('cascade');
  const [x, y] = [await direct.post('/v1/answer', body), await cascade.post('/v1/answer', body)];
  expect([x.status, y.status]).toEqual([200, 200]);
  x.body.answers.forEach((a: { logits: number[] }, i: number) => {
    expect(a.logits).toHaveLength(y.body.answers[i].logits.length);
    expect(maxAbsDiff(a.logits, y.body.answers[i].logits)).toBeLessThanOrEqual(1e-5);
  });
});
