/**
 * The attention softmax has an AVX-512 path and a portable one (for CPUs
 * without AVX-512); this machine takes the AVX-512 path, so the portable one
 * is forced in a second server (TQ_PORTABLE_KERNELS=1) and both must give the
 * same label logits (fp32).
 */
import { maxAbsDiff } from './helpers/reference';
import { startServer } from './helpers/server';

test('the portable kernels answer like the AVX-512 ones (fp32 logits within 1e-5)', async () => {
  const body = {
    state: 'The invoice of March was paid twice; the customer asked for a refund of the second payment. '.repeat(6),
    questions: [
      { kind: 'noul', instructions: 'Was the invoice paid twice?' },
      { kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] },
    ],
  };
  const fast = await startServer();
  const portable = await startServer([], { TQ_PORTABLE_KERNELS: '1' });
  try {
    expect((await fast.get('/health')).body.kernels).toBe('avx512');
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
