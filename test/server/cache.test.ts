/** The prefix cache through the server: health's cache group, warm answers equal cold ones, boundary registration. */
import { serverForFile, startServer } from '../helpers/server';

const sentence = (i: number) => `Entry ${i}: crate ${i * 7} was moved from dock ${i % 5} to dock ${(i + 2) % 5}.`;
const longState = (seed: number, n = 60) => Array.from({ length: n }, (_, i) => sentence(i + seed)).join(' ');
const questions = [{ kind: 'choice', instructions: 'Which dock?', options: ['dock 0', 'dock 1', 'dock 2'] }];

const server = serverForFile();

test('health reports the cache group', async () => {
  const h = (await server.get('/health')).body;
  expect(h.cache).toMatchObject({
    enabled: true,
    block_size: 16,
    match_unit: expect.any(String),
    cache_hit_unit: expect.any(String),
    hash_unit: expect.any(String),
    registers_state_boundary: true,
    register_boundary: 'after',
    state_boundary: { pending: expect.any(Number), deferred: expect.any(Number), registered: expect.any(Number), dropped: expect.any(Number), failed: expect.any(Number) },
    blocks: expect.objectContaining({ evicted: expect.any(Number) }),
    tokens: { hit: expect.any(Number), miss: expect.any(Number) },
  });
});

test('the second question about a state hits every state token once its boundary is registered after the first response; answers are unchanged', async () => {
  const state = longState(1);
  const before = (await server.get('/health')).body.cache.state_boundary.registered;
  const cold = await server.post('/v1/answer', { state, questions });
  expect(cold.body.timing.cached_tokens).toBe(0);
  const warm = await server.post('/v1/answer', { state, questions });
  // /health queued behind the registration, so it has run by now.
  expect((await server.get('/health')).body.cache.state_boundary.registered).toBeGreaterThan(before);
  expect(warm.body.timing.cached_tokens).toBeGreaterThan(0);
  const hot = await server.post('/v1/answer', { state, questions });
  expect(hot.body.timing.cached_tokens).toBeGreaterThanOrEqual(warm.body.timing.cached_tokens);
  for (const r of [warm, hot]) r.body.answers[0].probabilities.forEach((p: number, i: number) => expect(Math.abs(p - cold.body.answers[0].probabilities[i])).toBeLessThanOrEqual(1e-6));
  const h = (await server.get('/health')).body.cache;
  expect(h.tokens.hit).toBeGreaterThan(0);
});

test('a state that came whole from the cache registers no boundary again: the next request has nothing to wait behind', async () => {
  const state = longState(7);
  await server.post('/v1/answer', { state, questions });
  const whole = await server.post('/v1/answer', { state, questions });
  expect(whole.body.timing.cached_tokens).toBeGreaterThan(0);
  const registered = (await server.get('/health')).body.cache.state_boundary;
  for (let i = 0; i < 5; i++) {
    const again = await server.post('/v1/answer', { state, questions });
    expect(again.body.timing.cached_tokens).toBe(whole.body.timing.cached_tokens);
    expect(again.body.timing.waited_behind_registration).toBe(false);
    expect(again.headers.get('x-service-wait-behind')).toBeNull();
  }
  // (Each answer about the cached state queued a registration of the boundary it had just matched.)
  const after = (await server.get('/health')).body.cache.state_boundary;
  expect([after.pending, after.registered]).toEqual([registered.pending, registered.registered]);
});

test('a request that arrives while a boundary registration is queued says it waited behind it', async () => {
  // Without merging (so the order is deterministic): A, then B and C while A runs: A's registration
  // goes behind them (deferred). D, sent when B is answered, arrives while C runs with the
  // registrations still queued: it waits behind them.
  const server = await startServer(['--batch-tokens', '0']);
  const post = (seed: number, sentences = 150) => server.post('/v1/systemone', { state: longState(seed, sentences), questions: { q: { type: 'noul' } } });
  const h0 = (await server.get('/health')).body.cache.state_boundary;
  const a = post(100);
  await new Promise((r) => setTimeout(r, 5));
  const b = post(200);
  const c = post(300, 600); // long, so that D surely arrives while it runs
  await b;
  const d = await post(400);
  await Promise.all([a, c]);
  const h1 = (await server.get('/health')).body.cache.state_boundary;
  expect(h1.deferred).toBeGreaterThan(h0.deferred);
  expect(d.headers.get('x-service-wait-behind')).toBe('registration');
  const e = await post(100);
  expect(e.headers.get('x-service-wait-behind')).toBeNull();
  await server.stop();
});
