/**
 * The engine's kernels (GEMM, softmax) have AVX-512 and AVX2 paths and a
 * portable one (plain x86-64). The default server takes the best this CPU has;
 * the portable one is forced in a second server (TQ_KERNELS=portable), and
 * both must give the same label logits within 1e-5 (fp32; not bit for bit: the
 * portable GEMM has no fused multiply-add), and say which path they took.
 */
import { runnableIsaLevels } from '../helpers/cpu';
import { maxAbsDiff } from '../helpers/reference';
import { startServer } from '../helpers/server';

test('the portable kernels answer like the fastest ones this CPU has (fp32 logits within 1e-5)', async () => {
  const body = {
    state: 'The invoice of March was paid twice; the customer asked for a refund of the second payment. '.repeat(6),
    questions: [
      { kind: 'noul', instructions: 'Was the invoice paid twice?' },
      { kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] },
    ],
  };
  const fast = await startServer();
  const portable = await startServer([], { TQ_KERNELS: 'portable' });
  try {
    // The server's engine is fp32 here: the vdpbf16ps level is bf16's, so an fp32 engine on such a CPU says avx512.
    const best = runnableIsaLevels().find((level) => level !== 'avx512-bf16');
    expect((await fast.get('/health')).body.kernels).toBe(best);
    expect((await portable.get('/health')).body.kernels).toBe('portable');
    const [a, b] = [await fast.post('/v1/answer', body), await portable.post('/v1/answer', body)];
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    a.body.answers.forEach((ans: any, i: number) => {
      expect(ans.logits).toHaveLength(b.body.answers[i].logits.length);
      expect(maxAbsDiff(ans.logits, b.body.answers[i].logits)).toBeLessThanOrEqual(1e-5);
    });
  } finally {
    await fast.stop();
    await portable.stop();
  }
});
