/**
 * Cache salts (docs/operations.md, "Multi-tenant serving behind a proxy"): the same state under two
 * salts never shares cached work (the prefix cache's counters and the engine's computed tokens say
 * so), under one salt it does, and the answers are the same bits whatever the salt. The salt comes
 * from x-cache-salt, else from --cache-salt-header's header; it is bounded (422), never logged, counted
 * in /metrics and /health without its value, and part of what makes two requests in flight identical
 * and of what lets two requests in one batch share their state.
 */
import { engineQueue, serverForFile, until } from '../helpers/server';
import { longState } from '../helpers/texts';

const server = serverForFile(['--cache-salt-header', 'x-tenant']);

const question = [{ kind: 'choice', options: ['billing', 'shipping', 'other'] }];
const ask = (state: string, headers: Record<string, string> = {}) => server.post('/v1/answer', { state, questions: question }, headers);
const health = async () => (await server.get('/health')).body;

test('the same state under two salts never hits; under one it does, by x-cache-salt or the fallback header; answers are the same bits', async () => {
  const state = longState('salted-state', 400);
  const first = await ask(state, { 'x-cache-salt': 'tenant-A' });
  expect(first.status).toBe(200);
  expect(first.body.timing.cached_tokens).toBe(0);
  const again = await ask(state, { 'x-cache-salt': 'tenant-A' });
  expect(again.body.timing.cached_tokens).toBeGreaterThan(300);
  const other = await ask(state, { 'x-cache-salt': 'tenant-B' });
  expect(other.body.timing.cached_tokens).toBe(0);
  expect(other.body.timing.computed_tokens).toBe(first.body.timing.computed_tokens);
  const unsalted = await ask(state);
  expect(unsalted.body.timing.cached_tokens).toBe(0);
  // --cache-salt-header x-tenant: the same salt by the tenant header hits tenant-A's blocks; a salt differing in case does not.
  expect((await ask(state, { 'x-tenant': 'tenant-A' })).body.timing.cached_tokens).toBeGreaterThan(300);
  expect((await ask(state, { 'x-tenant': 'Tenant-A' })).body.timing.cached_tokens).toBe(0);
  for (const r of [again, other, unsalted]) expect(r.body.answers[0].logits).toEqual(first.body.answers[0].logits);
  // Salted prefixes hold blocks: tenant-A's, tenant-B's and Tenant-A's.
  expect((await health()).cache.salts).toEqual({ holding_blocks: 3, header: 'x-cache-salt', fallback_header: 'x-tenant' });
});

test('a salt is never logged nor reported: the log has a short hash, /metrics counts salted requests by hit', async () => {
  const secret = 'tenant-secret-OCELOT';
  await ask('A short note about an invoice', { 'x-cache-salt': secret });
  await ask('A short note about an invoice', { 'x-cache-salt': secret });
  const metrics = await (await fetch(server.url + '/metrics')).text();
  const count = (salted: string, hit: string) => Number(new RegExp(`^tqserve_prefix_cache_requests_total\\{service_route="text",salted="${salted}",hit="${hit}"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
  expect(count('yes', 'yes')).toBeGreaterThanOrEqual(1);
  expect(count('yes', 'no')).toBeGreaterThanOrEqual(1);
  expect(count('no', 'no')).toBeGreaterThanOrEqual(1);
  await until(async () => server.log().includes('"cache_salt"'), 'the access log has written a salted request');
  expect(server.log()).not.toContain(secret);
  expect(metrics).not.toContain(secret);
  expect(JSON.stringify(await health())).not.toContain(secret);
});

test('a salt that is empty or over 256 bytes is refused (422, naming the header); the server stays up', async () => {
  for (const [headers, name] of [
    [{ 'x-cache-salt': '' }, 'x-cache-salt'],
    [{ 'x-cache-salt': 'x'.repeat(257) }, 'x-cache-salt'],
    [{ 'x-tenant': 'y'.repeat(300) }, 'x-tenant'],
  ] as const) {
    const r = await ask('a state', headers);
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['header', name]);
    expect(r.body.detail[0].msg).toMatch(/at most 256 bytes/);
  }
  expect((await ask('a state', { 'x-cache-salt': 'z'.repeat(256) })).status).toBe(200);
  expect((await server.post('/v1/systemone', { state: 'a state', questions: { q: { type: 'noul' } } }, { 'x-cache-salt': '' })).status).toBe(422);
});

test('in flight and in one batch: identical bodies under two salts are two computations, and two requests share a state only under one salt', async () => {
  const before = await health();
  // The engine is busy with this one while the others queue behind it.
  const busy = ask(longState('busy-salted', 10000));
  await until(async () => (await engineQueue(server.url)).busy === 1, 'the engine is busy');
  const body = { state: longState('in-flight', 300), questions: question };
  const a = server.post('/v1/answer', body, { 'x-cache-salt': 'in-flight-A' });
  const b = server.post('/v1/answer', body, { 'x-cache-salt': 'in-flight-B' });
  const a2 = server.post('/v1/answer', body, { 'x-cache-salt': 'in-flight-A' });
  await until(async () => (await engineQueue(server.url)).queued === 2, 'the two salted computations wait, merged when the engine takes them');
  const [ra, rb, ra2] = await Promise.all([a, b, a2]);
  expect((await busy).status).toBe(200);
  expect(ra2.headers.get('x-service-joined')).toBe(ra.headers.get('x-typesafe-request-id'));
  expect(rb.headers.get('x-service-joined')).toBeNull();
  // One forward pass answered both salts, each computing the state: nothing shared between them.
  expect(ra.body.timing.batch_size).toBe(2);
  expect(rb.body.timing.batch_size).toBe(2);
  expect(ra.body.timing.computed_tokens).toBeGreaterThanOrEqual(2 * 300);
  expect(rb.body.answers[0].logits).toEqual(ra.body.answers[0].logits);
  const after = await health();
  expect(after.requests.joined_identical_in_flight - before.requests.joined_identical_in_flight).toBe(1);
});
