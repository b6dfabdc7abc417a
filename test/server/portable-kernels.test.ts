/**
 * The engine's kernels (GEMM, softmax) have AVX-512 and AVX2 paths and a
 * portable one (plain x86-64). The default server takes the best this CPU has;
 * the portable one is forced in a second server (TQ_KERNELS=portable), and
 * both must give the same label logits within 1e-5 (fp32; not bit for bit: the
 * portable GEMM has no fused multiply-add), and say which path they took.
 *
 * A third server computes attention as a cascade (`--attention cascade`, the
 * GPU's form: docs/gpu.md) over its CPU reference: the same answers within 1e-5.
 */
import { runnableIsaLevels } from '../helpers/cpu';
import { maxAbsDiff } from '../helpers/reference';
import { startServer, RunningServer } from '../helpers/server';

const body = {
  state: 'The invoice of March was paid twice; the customer asked for a refund of the second payment. '.repeat(6),
  questions: [
    { kind: 'noul', instructions: 'Was the invoice paid twice?' },
    { kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] },
  ],
};

let fast: RunningServer, portable: RunningServer, cascade: RunningServer;
beforeAll(async () => {
  [fast, portable, cascade] = await Promise.all([startServer(), startServer([], { TQ_KERNELS: 'portable' }), startServer(['--attention', 'cascade'])]);
});
afterAll(async () => Promise.all([fast, portable, cascade].map((s) => s?.stop())));

async function sameAnswers(a: RunningServer, b: RunningServer): Promise<void> {
  const [x, y] = [await a.post('/v1/answer', body), await b.post('/v1/answer', body)];
  expect(x.status).toBe(200);
  expect(y.status).toBe(200);
  x.body.answers.forEach((ans: any, i: number) => {
    expect(ans.logits).toHaveLength(y.body.answers[i].logits.length);
    expect(maxAbsDiff(ans.logits, y.body.answers[i].logits)).toBeLessThanOrEqual(1e-5);
  });
}

test('the portable kernels answer like the fastest ones this CPU has (fp32 logits within 1e-5)', async () => {
  // The default runs the level measured fastest on the model's GEMMs (or cached from an earlier measurement).
  const health = (await fast.get('/health')).body;
  const rates = Object.entries(health.kernel_choice.gflops as Record<string, number>).sort((a, b) => b[1] - a[1]);
  expect(['measured', 'cached']).toContain(health.kernel_choice.how);
  expect(health.kernels).toBe(rates[0][0]);
  expect(rates.map(([level]) => level)).toContain(runnableIsaLevels().find((level) => level !== 'avx512-bf16'));
  expect((await portable.get('/health')).body.kernels).toBe('portable');
  await sameAnswers(fast, portable);
});

test('a server with --attention cascade answers as the default does (fp32 logits within 1e-5) and says so', async () => {
  expect((await fast.get('/health')).body.attention).toBe('kernels');
  expect((await cascade.get('/health')).body.attention).toBe('cascade');
  await sameAnswers(fast, cascade);
});
