/**
 * The attention softmax has an AVX-512 path and a portable one (for CPUs
 * without AVX-512). On a CPU with AVX-512 the default server takes the AVX-512
 * path, so the portable one is forced in a second server (TQ_PORTABLE_KERNELS=1)
 * and both must give the same label logits (fp32). On a CPU without it both
 * servers take the portable path, and the test checks that they say so.
 */
import * as fs from 'fs';
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
    const flags = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1].split(/\s+/) ?? [];
    const avx512 = ['avx512f', 'avx512bw', 'avx512vl'].every((f) => flags.includes(f));
    expect((await fast.get('/health')).body.kernels).toBe(avx512 ? 'avx512' : 'portable');
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
