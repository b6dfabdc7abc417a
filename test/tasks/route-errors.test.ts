/** Bad task registrations and imports: each a 4xx with a detail naming the problem, and no stored task changed. */
import { detailText, expectProblems, RunningServer, startServer } from '../helpers/server';
import { keywordExamples, keywordQuestion, priorExamples, priorQuestion } from '../helpers/tasks';

jest.setTimeout(300_000);

let server: RunningServer;
let stored: any;
beforeAll(async () => {
  server = await startServer();
  const r = await server.post('/v1/tasks', { id: 'prior', examples: priorExamples(40) });
  expect(r.status).toBe(200);
  stored = (await server.get('/v1/tasks?full=1')).body;
});
afterAll(() => server.stop());

const good = priorExamples(12, 77);
const withExample = (i: number, change: (e: any) => any) => ({ id: 'bad', examples: good.map((e, j) => (j === i ? change(structuredClone(e)) : e)) });

const registrations: [string, number, unknown, RegExp][] = [
  ['not an object', 422, [], /must be an object/],
  ['no id', 422, { examples: good }, /body\.id: must be a task id/],
  ['id a number', 422, { id: 5, examples: good }, /body\.id/],
  ['id with a slash', 422, { id: 'a/b', examples: good }, /body\.id/],
  ['id too long', 422, { id: 'x'.repeat(129), examples: good }, /body\.id/],
  ['no examples', 422, { id: 'bad' }, /body\.examples: must be an array/],
  ['examples an object', 422, { id: 'bad', examples: {} }, /body\.examples: must be an array/],
  ['9 examples', 422, { id: 'bad', examples: good.slice(0, 9) }, /10 to 10000 examples, got 9/],
  ['10,001 examples', 422, { id: 'bad', examples: new Array(10_001).fill(good[0]) }, /got 10001/],
  ['an example not an object', 422, withExample(3, () => 'x'), /examples\.3: must be an object/],
  ['an example without request', 422, withExample(4, (e) => ({ answer: e.answer })), /examples\.4\.request: missing/],
  ['an example without answer', 422, withExample(5, (e) => ({ request: e.request })), /examples\.5\.answer: missing/],
  ['a request without state', 422, withExample(2, (e) => (delete e.request.state, e)), /examples\.2\.request\.state: missing/],
  ['a request with a blank state', 422, withExample(2, (e) => ((e.request.state = '  '), e)), /examples\.2\.request\.state: must not be blank/],
  ['a question with an unknown type', 422, withExample(1, (e) => ((e.request.questions.d.type = 'rank'), e)), /examples\.1\.request\.questions\.d\.type/],
  ['two questions', 422, withExample(6, (e) => ((e.request.questions.e = priorQuestion), e)), /examples\.6\.request\.questions: must hold exactly one question, got 2/],
  ['images', 422, withExample(7, (e) => ((e.request.images = ['data:image/png;base64,AAAA']), e)), /examples\.7\.request\.images: task examples are text only/],
  ['a different option list', 422, withExample(8, (e) => ((e.request.questions.d = { ...priorQuestion, criteria: { ...priorQuestion.criteria, legal: null } }), e)), /examples\.8\.request\.questions\.d: asks a different question than example 0: its options differ/],
  ['a different description', 422, withExample(8, (e) => ((e.request.questions.d = { ...priorQuestion, criteria: { ...priorQuestion.criteria, sales: 'deals' } }), e)), /its options differ/],
  ['different instructions', 422, withExample(9, (e) => ((e.request.questions.d = { ...priorQuestion, instructions: 'Who?' }), e)), /its instructions differ/],
  ['a different type', 422, withExample(9, (e) => ((e.request.questions.d = { type: 'noul' }), e)), /its type and instructions and options differ/],
  ['an answer that is no key', 422, withExample(0, (e) => ((e.answer = 'legal'), e)), /examples\.0\.answer: must be one of the option keys \("billing", "sales", "shipping", "support"\), got "legal"/],
  ['an answer a number for a choice', 422, withExample(0, (e) => ((e.answer = 1), e)), /examples\.0\.answer: must be one of the option keys/],
  ['a noul answer "yes"', 422, { id: 'bad', examples: Array.from({ length: 10 }, (_, i) => ({ request: { state: `s${i}`, questions: { n: { type: 'noul' } } }, answer: i ? true : 'yes' })) }, /examples\.0\.answer: must be true or false, got "yes"/],
  ['a score level out of range', 422, { id: 'bad', examples: Array.from({ length: 10 }, (_, i) => ({ request: { state: `s${i}`, questions: { s: { type: 'score', criteria: ['low', 'mid', 'high'] } } }, answer: i ? i % 3 : 3 })) }, /examples\.0\.answer: must be a level index from 0 to 2, got 3/],
  ['one distinct answer', 422, { id: 'bad', examples: good.map((e) => ({ ...e, answer: 'billing' })) }, /at least 2 distinct answers, got 1/],
  ['the question of another task', 422, { id: 'other', examples: good }, /another task, "prior", holds this question/],
  ['256 options', 400, { id: 'bad', examples: Array.from({ length: 10 }, (_, i) => ({ request: { state: `s${i}`, questions: { c: { type: 'choice', criteria: Object.fromEntries(Array.from({ length: 256 }, (_, k) => [`k${k}`, null])) } } }, answer: `k${i}` })) }, /example 0: 256 options: a question may have at most 255/],
];

test.each(registrations)('registration with %s → %i with a detail', async (_name, status, body, detail) => {
  const r = await server.post('/v1/tasks', body);
  expect(r.status).toBe(status);
  if (status === 422) expectProblems(r.body);
  expect(detailText(r.body)).toMatch(detail);
});

test('an example over the context: 422 naming the example, with both lengths', async () => {
  const examples = keywordExamples(12);
  examples[3].request.state = 'a' + ' a'.repeat(33_000);
  const r = await server.post('/v1/tasks', { id: 'long', examples });
  expect(r.status).toBe(422);
  expect(r.body.detail).toMatch(/^example 3: the rendered prompt is longer than the context: 33\d{3} tokens, the context holds 32768/);
});

const full = () => structuredClone(stored.tasks[0]);
const imports: [string, () => unknown, RegExp][] = [
  ['no tasks', () => ({}), /body\.tasks: must be an array/],
  ['tasks an object', () => ({ tasks: {} }), /body\.tasks: must be an array/],
  ['a task not an object', () => ({ tasks: [3] }), /body\.tasks\.0: must be an object/],
  ['a bad id', () => ({ tasks: [{ ...full(), id: '' }] }), /tasks\.0\.id: must be a task id/],
  ['an unknown type', () => ({ tasks: [{ ...full(), type: 'rank' }] }), /tasks\.0\.type/],
  ['instructions a number', () => ({ tasks: [{ ...full(), instructions: 3 }] }), /tasks\.0\.instructions: must be a string/],
  ['options not a list', () => ({ tasks: [{ ...full(), options: {} }] }), /tasks\.0\.options: must be an array of 2 to 255 options/],
  ['an option without key', () => ({ tasks: [{ ...full(), options: [{ description: null }, ...full().options.slice(1)] }] }), /tasks\.0\.options\.0: must be \{key/],
  ['a repeated option key', () => ({ tasks: [{ ...full(), options: [full().options[0], full().options[0], ...full().options.slice(2)] }] }), /must not repeat a key/],
  ['a match key that does not match', () => ({ tasks: [{ ...full(), match_key: '0'.repeat(32) }] }), /match_key: does not match/],
  ['an unknown applied', () => ({ tasks: [{ ...full(), applied: 'all' }] }), /applied: must be one of/],
  ['calibration missing', () => ({ tasks: [{ ...full(), calibration: undefined }] }), /calibration: must be/],
  ['a NaN-like temperature', () => ({ tasks: [{ ...full(), calibration: { ...full().calibration, a: 'NaN' } }] }), /calibration: must be/],
  ['a bias missing', () => ({ tasks: [{ ...full(), calibration: { ...full().calibration, b: { billing: 0 } } }] }), /calibration\.b: must give a finite number for each of the 4 option keys/],
  ['a bias null', () => ({ tasks: [{ ...full(), calibration: { ...full().calibration, b: { ...full().calibration.b, sales: null } } }] }), /calibration\.b/],
  ['an extra bias', () => ({ tasks: [{ ...full(), calibration: { ...full().calibration, b: { ...full().calibration.b, legal: 0 } } }] }), /calibration\.b/],
  ['a lambda string', () => ({ tasks: [{ ...full(), calibration: { ...full().calibration, lambda: 'x' } }] }), /calibration: must be/],
  ['head applied without a head', () => ({ tasks: [{ ...full(), applied: 'head', head: null }] }), /head: must be present/],
  ['a head of unknown form', () => ({ tasks: [{ ...full(), head: { form: 'mlp', lambda: 1, d: 64, W: {}, c: [] } }] }), /head: must be null or/],
  ['a head matrix of the wrong length', () => ({ tasks: [{ ...full(), head: { form: 'residual', lambda: 1, d: 64, W: { data: 'AAAA', sha256: 'x' }, c: [0, 0, 0, 0] } }] }), /head\.W\.data: must be base64 of 4 x 64 float32 values \(1024 bytes\), got 3 bytes/],
  ['a head matrix with a wrong hash', () => ({ tasks: [{ ...full(), head: { form: 'residual', lambda: 1, d: 1, W: { data: Buffer.alloc(16).toString('base64'), sha256: 'x' }, c: [0, 0, 0, 0] } }] }), /head\.W\.sha256: does not match/],
  ['a head matrix holding NaN', () => ({ tasks: [{ ...full(), head: nanHead() }] }), /head\.W\.data: must hold finite numbers only/],
  ['a head bias of the wrong length', () => ({ tasks: [{ ...full(), head: { ...zeroHead(), c: [0] } }] }), /head\.c: must be 4 finite numbers/],
  ['no fingerprint', () => ({ tasks: [{ ...full(), fingerprint: undefined }] }), /fingerprint: must be a string/],
  ['no record', () => ({ tasks: [{ ...full(), record: 'x' }] }), /record: must be an object/],
  ['a repeated id', () => ({ tasks: [full(), full()] }), /tasks\.1\.id: repeats the id "prior"/],
  ['one good task and one bad', () => ({ tasks: [{ ...full(), id: 'fine' }, { ...full(), id: 'broken', calibration: null }] }), /tasks\.1\.calibration/],
];

function headOf(W: Float32Array) {
  const bytes = Buffer.from(W.buffer);
  return { form: 'residual', lambda: 1, d: 2, W: { data: bytes.toString('base64'), sha256: require('crypto').createHash('sha256').update(bytes).digest('hex') }, c: [0, 0, 0, 0] };
}
function zeroHead() {
  return headOf(new Float32Array(8));
}
function nanHead() {
  return headOf(Float32Array.from([0, 0, NaN, 0, 0, 0, 0, 0]));
}

test.each(imports)('import with %s → 422 naming it', async (_name, body, detail) => {
  const r = await server.post('/v1/tasks/import', body());
  expect(r.status).toBe(422);
  expectProblems(r.body);
  expect(detailText(r.body)).toMatch(detail);
});

test('after every bad registration and import the stored tasks are unchanged, and the server answers', async () => {
  expect((await server.get('/v1/tasks?full=1')).body).toEqual(stored);
  const r = await server.post('/v1/systemone', { state: 'Ticket: refund please', questions: { d: priorQuestion, k: keywordQuestion() } });
  expect(r.status).toBe(200);
  expect(r.headers.get('x-service-tasks')).toBe('prior');
});
