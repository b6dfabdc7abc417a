/**
 * The format's official TypeScript client (@typesafe-ai/sdk), unchanged, against
 * the real server: only its base URL differs from a hosted deployment. Every
 * call it offers: the three question types and a mix, structured criteria,
 * the model list, request ids, its error classes for 400 and 422, abort, and
 * a timed-out attempt whose retry joins the computation in flight.
 */
import { APIUserAbortError, BadRequestError, choice, noul, score, TypeSafeClient, UnprocessableEntityError } from '@typesafe-ai/sdk';
import { RunningServer, startServer } from '../helpers/server';
import { longState } from '../helpers/texts';

let server: RunningServer;
let client: TypeSafeClient;
beforeAll(async () => {
  server = await startServer();
  client = new TypeSafeClient({ apiKey: 'ignored-by-the-server', baseURL: server.url, logLevel: 'off' });
});
afterAll(() => server.stop());

const state = { customer: 'Lyon', order: '42 pallets', status: '2 damaged by water' };
const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

test('noul: P(yes), with the model name the client sends by default echoed', async () => {
  const r = await client.systemOne({ state, questions: { damaged: noul('Was anything damaged?') } });
  expect(r.model).toBe('jev-latest');
  expect(r.answers.damaged.type).toBe('noul');
  expect(r.answers.damaged.noul).toBeGreaterThan(0);
  expect(r.answers.damaged.noul).toBeLessThan(1);
  expect(r.usage.output_tokens).toBe(1);
});

test('noul with criteria null (the helper without criteria), and with structured descriptions', async () => {
  const r = await client.systemOne({
    state,
    questions: {
      bare: { type: 'noul', instructions: 'Damaged?', criteria: null },
      described: noul({ ask: 'Damaged?' }, { true: { evidence: ['water', 'broken'] }, false: ['intact'] }),
    },
  });
  expect(r.answers.bare.noul).toBeGreaterThan(0);
  expect(r.answers.described.noul).toBeGreaterThan(0);
});

test('choice with descriptions as strings, objects, arrays and null', async () => {
  const r = await client.systemOne({ state, questions: { team: choice('Who handles it?', { a: { owns: ['refunds'] }, b: ['bugs'], c: 'logistics', d: null }) } });
  const a = r.answers.team;
  expect(Object.keys(a.probabilities).sort()).toEqual(['a', 'b', 'c', 'd']);
  expect(sum(a.probabilities)).toBeCloseTo(1, 12);
  expect(['a', 'b', 'c', 'd']).toContain(a.choice);
});

test('score with structured levels: the legend returns the levels as sent', async () => {
  const levels: [string, { level: string; within: string }, string[]] = ['not urgent', { level: 'soon', within: '2 days' }, ['today', 'now']];
  const r = await client.systemOne({ state, questions: { urgency: score('How urgent?', levels) } });
  const a = r.answers.urgency;
  expect(a.legend).toEqual({ 0: 'not urgent', 1: { level: 'soon', within: '2 days' }, 2: ['today', 'now'] });
  expect(sum(a.probabilities)).toBeCloseTo(1, 12);
  expect(a.score).toBeCloseTo(a.probabilities[1] + 2 * a.probabilities[2], 12);
});

test('mixed questions in one call answer like each asked alone', async () => {
  const questions = { damaged: noul('Was anything damaged?'), action: choice('What next?', { refund: 'money back', replace: null }), urgency: score('How urgent?', ['low', 'high']) };
  const together = await client.systemOne({ state: 'Mixed: the parcel arrived wet.', questions });
  for (const [name, q] of Object.entries(questions)) {
    const alone = await client.systemOne({ state: 'Mixed: the parcel arrived wet.', questions: { [name]: q } });
    const [x, y] = [(alone.answers as any)[name], (together.answers as any)[name]];
    expect(Object.keys(x).sort()).toEqual(Object.keys(y).sort());
    for (const k of ['noul', 'score', 'confidence']) if (x[k] !== undefined) expect(Math.abs(x[k] - y[k])).toBeLessThan(1e-6);
    if (x.choice !== undefined) expect(x.choice).toBe(y.choice);
  }
});

test('models.list: the served name and the jev-latest alias', async () => {
  const models = await client.models.list();
  expect(models.map((m) => m.name)).toEqual(['tiny-qwen3', 'jev-latest']);
  for (const m of models) {
    expect(typeof m.description).toBe('string');
    expect(m.release_date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  }
  expect(models[1].description).toContain('tiny-qwen3');
});

test('a request id on every response; an X-Request-Id sent is honoured', async () => {
  const { requestId } = await client.systemOne({ state, questions: { d: noul() } }).withResponse();
  expect(requestId).toMatch(/^req_[0-9a-f]{24}$/);
  const again = await client.systemOne({ state, questions: { d: noul() } }).withResponse();
  expect(again.requestId).not.toBe(requestId);
  const mine = await client.systemOne({ state, questions: { d: noul() } }, { headers: { 'X-Request-Id': 'trace-42' } }).withResponse();
  expect(mine.requestId).toBe('trace-42');
});

test('400: BadRequestError with the detail and a request id', async () => {
  const criteria = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`k${i}`, null]));
  const e = await client.systemOne({ state, questions: { q: choice('Which?', criteria) } }).catch((x: any) => x);
  expect(e).toBeInstanceOf(BadRequestError);
  expect(e.status).toBe(400);
  expect(e.message).toMatch(/256 options/);
  expect(e.requestId).toMatch(/^req_/);
});

test('422: UnprocessableEntityError naming every field, in the client-readable form', async () => {
  const e = await client.systemOne({ state: '  ', questions: { q: choice('Which?', {}), r: { type: 'rank' } as any } }).catch((x: any) => x);
  expect(e).toBeInstanceOf(UnprocessableEntityError);
  expect(e.message).toContain('state: must not be blank');
  expect(e.message).toContain('questions.q.criteria: must have at least 1 entry');
  expect(e.message).toContain('questions.r.type: must be one of "noul", "choice", "score"');
  expect(e.body.detail.every((p: any) => Array.isArray(p.loc) && p.loc[0] === 'body' && typeof p.msg === 'string' && typeof p.type === 'string')).toBe(true);
});

test('abort: APIUserAbortError, and the server keeps answering', async () => {
  const controller = new AbortController();
  const id = 'sdk-abort-test';
  const pending = client.systemOne({ state: longState('abort', 20000), questions: { d: noul() } }, { signal: controller.signal, headers: { 'x-request-id': id } });
  setTimeout(() => controller.abort(), 100);
  await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
  const r = await client.systemOne({ state, questions: { d: noul() } });
  expect(r.answers.d.noul).toBeGreaterThan(0);
  // The abandoned request ends on the server too (its access-log line: answered to nobody, or dropped), so that its
  // 20,000 tokens are not computed within the next test's count of the cache's lookups.
  while (!server.log().includes(`"request_id":"${id}"`)) await new Promise((r) => setTimeout(r, 50));
});

test('a timed-out attempt is retried and the retry joins the computation in flight: computed once', async () => {
  const before = (await server.get('/health')).body;
  const impatient = new TypeSafeClient({
    apiKey: 'x',
    baseURL: server.url,
    logLevel: 'off',
    timeout: 400,
    // Retries enough for a busy machine: the test waits for the computation, not for a clock.
    retry: { maxRetries: 200, backoffInitialMs: 100, backoffMaxMs: 100, backoffJitter: 0 },
  });
  // About 3 s of engine work on a quiet machine: every attempt times out until it is done.
  const r = await impatient.systemOne({ state: longState('retried', 20000), questions: { d: noul('Is it long?') } });
  expect(r.answers.d.noul).toBeGreaterThan(0);
  const after = (await server.get('/health')).body;
  expect(after.requests.joined_identical_in_flight).toBeGreaterThan(before.requests.joined_identical_in_flight);
  // Computed once: the tokens the cache missed are one lookup's worth. A retry
  // that arrives just after the answer (the client's clock, not the server's)
  // looks the state up again and finds it cached; one that computed it anew
  // would miss every token a second time.
  const lookups = after.cache.lookups - before.cache.lookups;
  const missed = after.cache.tokens.miss - before.cache.tokens.miss;
  const lookedUp = missed + after.cache.tokens.hit - before.cache.tokens.hit;
  // One engine call for every attempt while it ran; at most one more just after.
  expect(lookups).toBeGreaterThanOrEqual(1);
  expect(lookups).toBeLessThanOrEqual(2);
  expect(missed).toBeLessThan(1.5 * (lookedUp / lookups));
});
