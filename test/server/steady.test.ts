/**
 * Steady under load: concurrent clients with different states and shared
 * option lists get the very logits each request gets alone (bf16 and fp32),
 * and what the engine keeps per shape or per request is bounded, with its
 * sizes in /health.
 */
import { Engine } from '../../src/engine/engine';
import { tinyModel } from '../helpers/models';
import { RunningServer, startServer } from '../helpers/server';
import { longState, stateText } from '../helpers/texts';

const options = ['refund', 'discount', 'replacement', 'nothing'];
const states = [stateText, 'The parcel from Lyon arrived late and the box was torn.', 'Nobody has written to support this week.'];
const requests = states.flatMap((state, s) => [
  { state, questions: [{ kind: 'choice', instructions: 'What does the customer want?', options }, { kind: 'noul', instructions: 'Was anything damaged?' }] },
  { state, questions: [{ kind: 'choice', instructions: `Which outcome fits message ${s}?`, options }] },
  { state, questions: [{ kind: 'score', instructions: 'How upset is the customer?', options: ['calm', 'annoyed', 'angry'] }, { kind: 'choice', instructions: 'What does the customer want?', options }] },
]);
const KEPT_PER_THREAD = 8 << 20;
const logitsOf = (body: any) => JSON.stringify(body.answers.map((a: any) => a.logits));

describe.each([
  ['bf16', 'after'],
  ['fp32', 'before'],
])('%s, options %s the instructions', (dtype, position) => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer(['--dtype', dtype, '--options-position', position]);
  });
  afterAll(() => server.stop());

  test('8 concurrent clients get, three times over, the logits each request got alone', async () => {
    const alone: string[] = [];
    for (const r of requests) {
      const res = await server.post('/v1/answer', r);
      expect(res.status).toBe(200);
      alone.push(logitsOf(res.body));
    }
    for (let round = 0; round < 3; round++) {
      // Eight at a time, in a different order each round: the engine merges whatever queues together.
      const order = requests.map((_, i) => (i * (round + 2) + round) % requests.length);
      const results: string[] = new Array(requests.length);
      for (let a = 0; a < order.length; a += 8) {
        const wave = order.slice(a, a + 8);
        const replies = await Promise.all(wave.map((i) => server.post('/v1/answer', requests[i])));
        replies.forEach((res, k) => (results[wave[k]] = logitsOf(res.body)));
      }
      results.forEach((got, i) => expect(`${i}: ${got}`).toBe(`${i}: ${alone[i]}`));
    }
  });

  test('/health reports the memory the processes keep', async () => {
    const { memory, batch_invariant, own_gemm } = (await server.get('/health')).body;
    expect(batch_invariant).toBe(true);
    expect(own_gemm).toBe(false);  // --own-gemm's default; on the CPU it is refused (cli.test.ts)
    expect(memory.server_rss_bytes).toBeGreaterThan(0);
    expect(memory.engine_rss_bytes).toBeGreaterThan(0);
    expect(memory.kv_cache_bytes).toBeGreaterThan(0);
    expect(memory.attention_buffer_bytes).toBeGreaterThan(0);
    expect(memory.onednn_primitives).toEqual({ cached: 0, max: 64 });
  });
});

describe('bounded engine memory', () => {
  test('oneDNN primitives: more shapes than the bound are driven, the least recently used are evicted', async () => {
    const e = await Engine.open({ path: tinyModel('tiny-qwen3'), dtype: 'fp32', threads: 2, batchInvariant: false });
    try {
      // 40 question lengths: 40 values of M, each needing primitives for five linear layers.
      for (let n = 1; n <= 40; n++) {
        await e.answer({ state: [], questions: [{ tokens: Array.from({ length: n }, (_, i) => 100 + i), labelIds: [5, 6] }] });
        expect((await e.memoryStats()).cachedPrimitives).toBeLessThanOrEqual(64);
      }
      expect((await e.memoryStats()).cachedPrimitives).toBe(64);
    } finally {
      await e.close();
    }
  });

  test("a long state's attention buffers are returned when its step ends: at most 8 MiB per thread stays", async () => {
    const e = await Engine.open({ path: tinyModel('tiny-qwen3'), dtype: 'fp32', threads: 2 });
    try {
      const ids = (n: number) => Array.from({ length: n }, (_, i) => 1000 + (i % 5000));
      await e.answer({ state: ids(200), questions: [{ tokens: [7, 8], labelIds: [5, 6] }] });
      expect((await e.memoryStats()).attentionBufferBytes).toBeGreaterThan(0);
      // 24,000 keys: its prefill's items need about 14 MiB per thread (scores, packed keys and values).
      await e.answer({ state: ids(24000), questions: [{ tokens: [7, 8], labelIds: [5, 6] }] });
      const stats = await e.memoryStats();
      expect(stats.attentionBufferKeptBytes).toBe(KEPT_PER_THREAD);
      expect(stats.attentionBufferBytes).toBeLessThanOrEqual(2 * KEPT_PER_THREAD);
    } finally {
      await e.close();
    }
  });
});

test('a long state through the server: the engine keeps at most 8 MiB of attention buffers per thread', async () => {
  const server = await startServer(['--cache-mib', '64']);
  try {
    expect((await server.post('/v1/answer', { state: longState('long', 20000), questions: [{ kind: 'noul', instructions: 'Is it long?' }] })).status).toBe(200);
    const health = (await server.get('/health')).body;
    expect(health.cache.budget_from).toBe('mib');
    expect(health.cache.budget_bytes).toBeLessThanOrEqual(64 * 2 ** 20);
    expect(health.memory.attention_buffer_bytes).toBeLessThanOrEqual(health.threads * KEPT_PER_THREAD);
    expect(health.memory.attention_buffer_bytes_kept_max_per_thread).toBe(KEPT_PER_THREAD);
  } finally {
    await server.stop();
  }
});
