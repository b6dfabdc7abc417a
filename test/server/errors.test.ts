/** Bad input gets 4xx with a detail and the server stays up; the 32,768-token boundary; ties. */
import { detailText, expectProblems, RunningServer, serverForFile, startServer } from '../helpers/server';

const server = serverForFile();

const q = { a: { type: 'noul' } };
const malformed: [string, number, unknown][] = [
  ['not JSON', 422, '{bad'],
  ['truncated JSON', 422, '{"state": "x", "questions": {'],
  ['empty body', 422, ''],
  ['JSON null', 422, 'null'],
  ['JSON number', 422, '42'],
  ['JSON string', 422, '"hello"'],
  ['JSON array', 422, '[]'],
  ['no state', 422, { questions: q }],
  ['no questions', 422, { state: 'x' }],
  ['questions empty', 422, { state: 'x', questions: {} }],
  ['questions an array', 422, { state: 'x', questions: [{ type: 'noul' }] }],
  ['questions a string', 422, { state: 'x', questions: 'a' }],
  ['state null', 422, { state: null, questions: q }],
  ['state a number', 422, { state: 3, questions: q }],
  ['state a boolean', 422, { state: true, questions: q }],
  ['state blank', 422, { state: '   ', questions: q }],
  ['question not an object', 422, { state: 'x', questions: { a: 'noul' } }],
  ['question without type', 422, { state: 'x', questions: { a: {} } }],
  ['unknown type', 422, { state: 'x', questions: { a: { type: 'rank' } } }],
  ['type not a string', 422, { state: 'x', questions: { a: { type: 1 } } }],
  ['choice without criteria', 422, { state: 'x', questions: { a: { type: 'choice' } } }],
  ['choice criteria a list', 422, { state: 'x', questions: { a: { type: 'choice', criteria: ['x', 'y'] } } }],
  ['choice criteria empty', 422, { state: 'x', questions: { a: { type: 'choice', criteria: {} } } }],
  ['choice description a number', 422, { state: 'x', questions: { a: { type: 'choice', criteria: { x: 1 } } } }],
  ['score without criteria', 422, { state: 'x', questions: { a: { type: 'score' } } }],
  ['score criteria an object', 422, { state: 'x', questions: { a: { type: 'score', criteria: { x: 'y' } } } }],
  ['score criteria empty', 422, { state: 'x', questions: { a: { type: 'score', criteria: [] } } }],
  ['score level not a string', 422, { state: 'x', questions: { a: { type: 'score', criteria: ['low', 2] } } }],
  ['noul criteria a string', 422, { state: 'x', questions: { a: { type: 'noul', criteria: 'yes' } } }],
  ['noul true description a number', 422, { state: 'x', questions: { a: { type: 'noul', criteria: { true: 1 } } } }],
  ['instructions a number', 422, { state: 'x', questions: { a: { type: 'noul', instructions: 5 } } }],
  ['model not a string', 422, { model: 7, state: 'x', questions: q }],
  ['orders out of range', 422, { state: 'x', questions: q, orders: 3 }],
  ['images not a list', 422, { state: 'x', questions: q, images: 'data:' }],
  ['a well-formed image sent without an image engine', 400, { state: 'x', questions: q, images: ['data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='] }],
  ['257 options', 400, { state: 'x', questions: { a: { type: 'choice', criteria: Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`k${i}`, null])) } } }],
];

// Validation failures (422) list their problems; other errors (400) have a string detail.
test.each(malformed)('%s → %i with a detail', async (_name, status, body) => {
  const r = await server.post('/v1/systemone', body as any);
  expect(r.status).toBe(status);
  if (status === 422) expectProblems(r.body);
  else expect(typeof r.body.detail).toBe('string');
  expect(detailText(r.body).length).toBeGreaterThan(5);
});

test('details name the field and say what to send', async () => {
  const detail = async (body: unknown) => (await server.post('/v1/systemone', body)).body.detail;
  expect(await detail({ state: 'x', questions: { a: { type: 'choice' } } })).toEqual([{ loc: ['body', 'questions', 'a', 'criteria'], msg: 'missing required field "criteria"', type: 'missing' }]);
  expect(await detail({ state: 'x', questions: { a: { type: 'rank' } } })).toEqual([{ loc: ['body', 'questions', 'a', 'type'], msg: 'must be one of "noul", "choice", "score"', type: 'literal_error' }]);
  expect(await detail({ state: 'x', questions: { a: { type: 'score', criteria: ['low', 2] } } })).toEqual([
    { loc: ['body', 'questions', 'a', 'criteria', 1], msg: 'must be a string or an object or an array', type: 'type_error' },
  ]);
  const bad = await detail('{bad');
  expect(bad[0].msg).toMatch(/^body is not valid JSON/);
  expect(bad[0].type).toBe('json_invalid');
  // The first problem named is the real one: a question without a type is told that, not what a choice would need.
  expect(await detail({ state: 'x', questions: { a: {} } })).toEqual([{ loc: ['body', 'questions', 'a', 'type'], msg: 'missing required field "type"', type: 'missing' }]);
  // Every problem is listed.
  expect((await detail({ state: '', questions: { a: { type: 'choice', criteria: {} }, b: { type: 'score' } }, orders: 5 })).map((p: any) => p.loc.join('.'))).toEqual([
    'body.state',
    'body.questions.a.criteria',
    'body.questions.b.criteria',
    'body.orders',
  ]);
});

test('a form-encoded body, a wrong method and an unknown route get clear errors', async () => {
  const form = await fetch(server.url + '/v1/systemone', { method: 'POST', body: 'state=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  expect(form.status).toBe(422);
  expect(detailText(await form.json())).toMatch(/Content-Type: application\/json/);
  const get = await server.get('/v1/systemone');
  expect(get.status).toBe(405);
  const missing = await server.get('/v2/nothing');
  expect(missing.status).toBe(404);
  expect(missing.body.detail).toMatch(/no route/);
});

test('JSON is read under any JSON media type, with parameters and in any case; another type, or none, is 422', async () => {
  const body = JSON.stringify({ state: 'The sky is blue.', questions: q });
  const send = (headers: Record<string, string>) => fetch(server.url + '/v1/systemone', { method: 'POST', body, headers });
  for (const type of ['application/json; charset=utf-8', 'Application/JSON', ' application/json ;charset=UTF-8', 'application/vnd.example+json']) {
    expect({ type, status: (await send({ 'content-type': type })).status }).toEqual({ type, status: 200 });
  }
  for (const type of ['text/plain', 'application/jsonx', 'application/+json', 'json']) {
    const r = await send({ 'content-type': type });
    expect({ type, status: r.status }).toEqual({ type, status: 422 });
    expect(detailText(await r.json())).toContain(`got ${type}`);
  }
  const untyped = await fetch(server.url + '/v1/systemone', { method: 'POST', body: new Blob([body]) });
  expect(untyped.status).toBe(422);
  expect(detailText(await untyped.json())).toMatch(/got no Content-Type/);
});

test('the server stayed up through all of it', async () => {
  const r = await server.post('/v1/systemone', { state: 'The sky is blue.', questions: q });
  expect(r.status).toBe(200);
  expect((await server.get('/health')).body.ok).toBe(true);
});

test('32,768 tokens: at the limit answers 200, one over gets 422 with both lengths, then a normal request answers', async () => {
  // Calibrate: each " a" in the state is one token; usage.input_tokens is the whole prompt for one question.
  const ask = (k: number) => server.post('/v1/systemone', { state: 'a' + ' a'.repeat(k), questions: q });
  const [l10, l20] = [(await ask(10)).body.usage.input_tokens, (await ask(20)).body.usage.input_tokens];
  expect(l20 - l10).toBe(10);
  const k = 10 + (32768 - l10);
  const atLimit = await ask(k);
  expect(atLimit.status).toBe(200);
  expect(atLimit.body.usage.input_tokens).toBe(32768);
  const over = await ask(k + 1);
  expect(over.status).toBe(422);
  expect(over.body.detail).toContain('longer than the context');
  expect(over.body.detail).toContain('32769 tokens');
  expect(over.body.detail).toContain('32768');
  const after = await server.post('/v1/systemone', { state: 'The sky is blue.', questions: q });
  expect(after.status).toBe(200);
});

test('/v1/answer refuses over-long prompts the same way', async () => {
  const r = await server.post('/v1/answer', { state: 'a' + ' a'.repeat(33000), questions: [{ kind: 'noul' }] });
  expect(r.status).toBe(422);
  expect(r.body.detail).toContain('longer than the context');
});

describe('exact ties go to the first key in code-point order, whatever the arrival order', () => {
  let flat: RunningServer;
  // A huge temperature makes every probability exactly 1/n.
  beforeAll(async () => {
    flat = await startServer(['--temperature-choice', '1e30']);
  });
  afterAll(() => flat.stop());

  test.each([
    [['beta', 'alpha', 'gamma'], 'alpha'],
    [['gamma', 'beta', 'alpha'], 'alpha'],
    [['b', 'B', 'a'], 'B'],
    // U+FF5E sorts before U+1F600 in code points, though not in UTF-16 code units.
    [['\u{1F600}', '\uFF5E'], '\uFF5E'],
  ])('%j → %s', async (keys, expected) => {
    const criteria = Object.fromEntries((keys as string[]).map((k) => [k, null]));
    const r = await flat.post('/v1/systemone', { state: 'x y z', questions: { q: { type: 'choice', criteria } } });
    expect(r.status).toBe(200);
    expect(new Set(Object.values(r.body.answers.q.probabilities)).size).toBe(1);
    expect(r.body.answers.q.choice).toBe(expected);
    expect(r.body.answers.q.confidence).toBe(0);
  });
});
