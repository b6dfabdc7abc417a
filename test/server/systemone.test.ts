/** /v1/systemone over HTTP on the real server (tiny Qwen3, fp32). */
import { modelTokenizer } from '../helpers/tokens';
import { tinyModel } from '../helpers/models';
import { expectSameAnswers, RunningServer, startServer } from '../helpers/server';

const state = 'The warehouse in Rotterdam received 42 pallets of coffee on Monday. Two were damaged by water.';
const questions = {
  damaged: { type: 'noul', instructions: 'Was any pallet damaged?', criteria: { true: 'at least one pallet damaged', false: 'all intact' } },
  city: { type: 'choice', instructions: 'Which city?', criteria: { rotterdam: 'the Dutch port', lyon: null, porto: 'in Portugal' } },
  urgency: { type: 'score', instructions: 'How urgent?', criteria: ['not urgent', 'somewhat', 'very urgent'] },
};

const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

let server: RunningServer;
let debug: RunningServer;
beforeAll(async () => {
  [server, debug] = await Promise.all([startServer(), startServer(['--debug-readout'])]);
});
afterAll(async () => {
  await Promise.all([server.stop(), debug.stop()]);
});

test('each question type answers in the wire format, keys exactly as sent', async () => {
  const r = await server.post('/v1/systemone', { state, questions });
  expect(r.status).toBe(200);
  expect(Object.keys(r.body.answers)).toEqual(['damaged', 'city', 'urgency']);
  const { damaged, city, urgency } = r.body.answers;
  expect(damaged.type).toBe('noul');
  expect(damaged.noul).toBeGreaterThan(0);
  expect(damaged.noul).toBeLessThan(1);
  expect(city.type).toBe('choice');
  expect(Object.keys(city.probabilities)).toEqual(['rotterdam', 'lyon', 'porto']);
  expect(sum(city.probabilities)).toBeCloseTo(1, 12);
  const top = Object.entries(city.probabilities as Record<string, number>).sort((a, b) => b[1] - a[1])[0];
  expect(city.choice).toBe(top[0]);
  expect(city.confidence).toBeCloseTo((top[1] - 1 / 3) / (1 - 1 / 3), 12);
  expect(urgency.type).toBe('score');
  expect(Object.keys(urgency.probabilities)).toEqual(['0', '1', '2']);
  expect(urgency.legend).toEqual({ 0: 'not urgent', 1: 'somewhat', 2: 'very urgent' });
  const p = [0, 1, 2].map((i) => urgency.probabilities[String(i)]);
  expect(urgency.score).toBeCloseTo(p[1] + 2 * p[2], 12);
  const mode = p.indexOf(Math.max(...p));
  const spread = p.reduce((s, v, i) => s + v * Math.abs(i - mode), 0);
  expect(urgency.confidence).toBeCloseTo(Math.min(1, Math.max(0, 1 - spread / (2 / 3))), 12);
  expect(r.body.model).toBe('tiny-qwen3');
});

test('model: absent gives the served name, sent is echoed; Authorization is ignored; unknown fields are ignored at every level', async () => {
  const a = await server.post('/v1/systemone', { model: 'gpt-4o', state, questions: { q: questions.damaged } }, { authorization: 'Bearer sk-anything' });
  expect(a.status).toBe(200);
  expect(a.body.model).toBe('gpt-4o');
  const b = await server.post('/v1/systemone', {
    state,
    questions: { q: { ...questions.city, extra: 1, criteria: { ...questions.city.criteria } } },
    unknown: { deep: [1, 2] },
    stream: true,
  });
  expect(b.status).toBe(200);
  const c = await server.post('/v1/systemone', { state, questions: { q: questions.city } });
  expectSameAnswers(b.body.answers, c.body.answers);
});

test('state as string, object and array; objects render as key: value lines', async () => {
  const obj = await server.post('/v1/systemone', { state: { city: 'Lyon', refund: true, items: [1, 2] }, questions: { q: questions.damaged } });
  const lines = await server.post('/v1/systemone', { state: 'city: Lyon\nrefund: true\nitems: [1,2]', questions: { q: questions.damaged } });
  expect(obj.status).toBe(200);
  expectSameAnswers(obj.body.answers, lines.body.answers);
  const arr = await server.post('/v1/systemone', { state: ['first line', { a: 1 }, 3], questions: { q: questions.damaged } });
  const arrText = await server.post('/v1/systemone', { state: 'first line\na: 1\n3', questions: { q: questions.damaged } });
  expectSameAnswers(arr.body.answers, arrText.body.answers);
});

test('instructions: object and array are sent as compact JSON; blank and absent use the same default', async () => {
  const obj = await server.post('/v1/systemone', { state, questions: { q: { type: 'noul', instructions: { ask: 'damaged?', strict: true } } } });
  const json = await server.post('/v1/systemone', { state, questions: { q: { type: 'noul', instructions: '{"ask":"damaged?","strict":true}' } } });
  expectSameAnswers(obj.body.answers, json.body.answers);
  const arr = await server.post('/v1/systemone', { state, questions: { q: { type: 'noul', instructions: ['a', 1] } } });
  const arrJson = await server.post('/v1/systemone', { state, questions: { q: { type: 'noul', instructions: '["a",1]' } } });
  expectSameAnswers(arr.body.answers, arrJson.body.answers);
  const blank = await server.post('/v1/systemone', { state, questions: { q: { type: 'choice', instructions: '   ', criteria: { x: null, y: null } } } });
  const absent = await server.post('/v1/systemone', { state, questions: { q: { type: 'choice', criteria: { x: null, y: null } } } });
  const named = await server.post('/v1/systemone', { state, questions: { q: { type: 'choice', instructions: 'Which option fits the text best?', criteria: { x: null, y: null } } } });
  expectSameAnswers(blank.body.answers, absent.body.answers);
  expectSameAnswers(absent.body.answers, named.body.answers);
});

test('noul criteria are used in the prompt', async () => {
  const tok = await modelTokenizer(tinyModel('tiny-qwen3'));
  const r = await debug.post('/v1/systemone', { state, questions: { q: questions.damaged } }, { 'x-service-debug': 'readout' });
  const prompt = await tok.decode(r.body.readout.q.prompt_token_ids);
  expect(prompt).toContain('at least one pallet damaged');
  expect(prompt).toContain('all intact');
  const without = await server.post('/v1/systemone', { state, questions: { q: { type: 'noul', instructions: questions.damaged.instructions } } });
  expect(without.body.answers.q.noul).not.toBe(r.body.answers.q.noul);
});

test('usage: input tokens are the rendered state plus each question, in the served tokenizer; one output token per question', async () => {
  const r = await debug.post('/v1/systemone', { state, questions }, { 'x-service-debug': 'readout' });
  const readouts: { prompt_token_ids: number[]; state_token_count: number }[] = Object.values(r.body.readout);
  const shared = readouts[0].state_token_count;
  const tok = await modelTokenizer(tinyModel('tiny-qwen3'));
  // The state segment is the same in every prompt, holds the state, and re-tokenizes to itself.
  for (const q of readouts) expect(q.prompt_token_ids.slice(0, shared)).toEqual(readouts[0].prompt_token_ids.slice(0, shared));
  const prefix = await tok.decode(readouts[0].prompt_token_ids.slice(0, shared));
  expect(prefix).toContain(state);
  expect(prefix.trimEnd().endsWith('</state>')).toBe(true);
  expect(await tok.encode(prefix)).toEqual(readouts[0].prompt_token_ids.slice(0, shared));
  // Each question's own text, re-tokenized, is its segment.
  for (const q of readouts) {
    const own = q.prompt_token_ids.slice(shared);
    expect(await tok.encode(await tok.decode(own))).toEqual(own);
  }
  const expected = shared + readouts.reduce((s, q) => s + q.prompt_token_ids.length - shared, 0);
  expect(r.body.usage).toEqual({ input_tokens: expected, output_tokens: 3 });
});

test('headers: server time, route and stages; wait is 0 on an idle server', async () => {
  const r = await server.post('/v1/systemone', { state, questions });
  expect(Number(r.headers.get('x-service-server-ms'))).toBeGreaterThan(0);
  expect(r.headers.get('x-service-route')).toBe('text');
  const stages = Object.fromEntries(r.headers.get('x-service-stages')!.split(';').map((kv) => kv.split('=')));
  expect(Object.keys(stages)).toEqual(['prepare', 'warm', 'questions', 'readout', 'engine', 'wait', 'hop', 'plan']);
  Object.values(stages).forEach((v) => expect(Number(v)).toBeGreaterThanOrEqual(0));
  expect(Number(stages.wait)).toBe(0);
  expect(Number(stages.engine) + Number(stages.wait) + Number(stages.hop)).toBeLessThanOrEqual(Number(r.headers.get('x-service-server-ms')) + 1);
  const text = await server.post('/v1/systemone', { state, questions }, { 'x-service-route': 'text' });
  expect(text.status).toBe(200);
  const image = await server.post('/v1/systemone', { state, questions }, { 'x-service-route': 'image' });
  expect(image.status).toBe(400);
  expect(image.body.detail).toMatch(/--image-model/);
  expect((await server.post('/v1/systemone', { state, questions }, { 'x-jev-route': 'image' })).status).toBe(400);
});

test('debug readout: only on a --debug-readout server, with the header or its earlier name', async () => {
  const off = await server.post('/v1/systemone', { state, questions }, { 'x-service-debug': 'readout' });
  expect(off.status).toBe(200);
  expect(off.body.readout).toBeUndefined();
  const on = await debug.post('/v1/systemone', { state, questions }, { 'x-service-debug': 'readout' });
  expect(Object.keys(on.body.readout)).toEqual(['damaged', 'city', 'urgency']);
  const q = on.body.readout.city;
  expect(q.label_token_ids).toHaveLength(3);
  expect(q.label_logits).toHaveLength(3);
  expect(q.temperature).toBe(1);
  expect(q.hidden).toBeUndefined();
  const hidden = await debug.post('/v1/systemone', { state, questions }, { 'x-jev-debug': 'hidden' });
  expect(hidden.body.readout.city.hidden).toHaveLength(64);
  const plain = await debug.post('/v1/systemone', { state, questions });
  expect(plain.body.readout).toBeUndefined();
  // The probabilities are the softmax of the raw label logits at the temperature.
  const e = q.label_logits.map((l: number) => Math.exp(l / q.temperature));
  const z = e.reduce((a: number, b: number) => a + b, 0);
  expect(Object.values(on.body.answers.city.probabilities)).toEqual(e.map((v: number) => expect.closeToValue(v / z)));
});

test('orders: 2 averages the options as sent and reversed', async () => {
  const q = { type: 'choice', instructions: 'Which city?', criteria: { rotterdam: 'the Dutch port', lyon: null, porto: 'in Portugal' } };
  const reversed = { ...q, criteria: { porto: 'in Portugal', lyon: null, rotterdam: 'the Dutch port' } };
  const both = await server.post('/v1/systemone', { state, questions: { q }, orders: 2 });
  const a = await server.post('/v1/systemone', { state, questions: { q } });
  const b = await server.post('/v1/systemone', { state, questions: { q: reversed } });
  for (const k of ['rotterdam', 'lyon', 'porto'])
    expect(both.body.answers.q.probabilities[k]).toBeCloseTo((a.body.answers.q.probabilities[k] + b.body.answers.q.probabilities[k]) / 2, 6);
  expect(Object.keys(both.body.answers.q.probabilities)).toEqual(['rotterdam', 'lyon', 'porto']);
});

test('255 options answer; 256 is refused with 400 and a detail', async () => {
  const criteria = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`option ${i}`, null]));
  const ok = await server.post('/v1/systemone', { state, questions: { q: { type: 'choice', criteria: criteria(255) } } });
  expect(ok.status).toBe(200);
  expect(Object.keys(ok.body.answers.q.probabilities)).toHaveLength(255);
  expect(sum(ok.body.answers.q.probabilities)).toBeCloseTo(1, 9);
  const tooMany = await server.post('/v1/systemone', { state, questions: { q: { type: 'choice', criteria: criteria(256) } } });
  expect(tooMany.status).toBe(400);
  expect(tooMany.body.detail).toMatch(/256 options.*at most 255/);
  expect((await server.get('/health')).status).toBe(200);
});

test('health reports the labels verified in context, the base and the engine process', async () => {
  const h = await server.get('/health');
  expect(h.status).toBe(200);
  expect(h.body.ok).toBe(true);
  expect(h.body.prompt_format.labels_available.max_options).toBe(255);
  expect(h.body.base.random_weights).toBe(true);
  expect(h.body.base.note).toMatch(/random-weight/);
  expect(h.body.base.engine_process.pid).toEqual(expect.any(Number));
  expect(h.body.base.engine_process.pid).not.toBe(server.process.pid);
  expect(h.body.systemone.temperatures).toEqual({ noul: 1, choice: 1, score: 1 });
  const models = await server.get('/v1/models');
  expect(models.body.data[0].id).toBe('tiny-qwen3');
});
