/** Bad abstention registrations and imports: each a 4xx with a detail naming the problem, and nothing stored changed. */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { detailText, expectProblems, RunningServer, startServer } from '../../helpers/server';
import { keywordExamples, priorQuestion } from '../../helpers/tasks';

jest.setTimeout(300_000);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-abstention-errors-'));
const file = path.join(dir, 'tasks.json');
let server: RunningServer;
let stored: any, storedFile: Buffer;

/** Tickets about the prior question: every third unanswerable. */
const examples = (n: number, nullEvery = 3, question: object = priorQuestion) =>
  Array.from({ length: n }, (_, i) => ({ request: { state: `Ticket ${i}: ${i % 2 ? 'a refund' : 'a lost parcel'}`, questions: { q: question } }, answer: i % nullEvery === 0 ? null : i % 2 ? 'billing' : 'shipping' }));
const good = examples(36);
const body = (change: Record<string, unknown> = {}) => ({ id: 'bad', option: { append: 'none of these' }, match: 'option_set', examples: good, ...change });
const withExample = (i: number, change: (e: any) => any) => body({ examples: good.map((e, j) => (j === i ? change(structuredClone(e)) : e)) });
const PNG_1x1 = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const unsure = { ...priorQuestion, criteria: { ...priorQuestion.criteria, unsure: 'cannot tell' } };

beforeAll(async () => {
  server = await startServer(['--tasks-file', file]);
  const r = await server.post('/v1/abstention/tasks', { ...body(), id: 'tickets' });
  expect(r.status).toBe(200);
  stored = (await server.get('/v1/tasks?full=1')).body;
  storedFile = fs.readFileSync(file);
});
afterAll(async () => {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const registrations: [string, number, unknown, RegExp][] = [
  ['not an object', 422, ['x'], /body: must be an object \{id, option, match, examples\}/],
  ['a bad id', 422, body({ id: 'a b' }), /body\.id: must be a task id/],
  ['no option', 422, body({ option: undefined }), /body\.option: must be \{"key"/],
  ['neither key nor append', 422, body({ option: {} }), /body\.option: .*neither was given/],
  ['both key and append', 422, body({ option: { key: 'billing', append: 'none' } }), /body\.option: .*not both/],
  ['a key not a string', 422, body({ option: { key: 5 } }), /body\.option\.key: must be a non-empty string/],
  ['an empty key', 422, body({ option: { key: '' } }), /body\.option\.key: must be a non-empty string/],
  ['a blank append', 422, body({ option: { append: '  ' } }), /body\.option\.append: must be a non-blank string/],
  ['an append not a string', 422, body({ option: { append: ['x'] } }), /body\.option\.append: must be a non-blank string/],
  ['an unknown match', 422, body({ match: 'regex' }), /body\.match: must be one of "option_set", "imajev_extension", got "regex"/],
  ['9 examples', 422, body({ examples: good.slice(0, 9) }), /body\.examples: must hold 10 to 10000 examples, got 9/],
  ['the key missing from an example\'s options', 422, { ...body({ option: { key: 'unsure' } }), examples: examples(36, 3, unsure).map((e, i) => (i === 3 ? { ...e, request: { ...e.request, questions: { q: priorQuestion } } } : e)) }, /examples\.3\.request\.questions\.q: the abstain key "unsure" is not among this question's options/],
  ['the key form on a yes/no question', 422, body({ option: { key: 'true' }, examples: examples(30, 3, { type: 'noul' }) }), /a yes\/no question has no option of its own to abstain with/],
  ['a yes/no question appending "false"', 422, body({ option: { append: 'false' }, examples: examples(30, 3, { type: 'noul' }).map((e, i) => ({ ...e, answer: i % 3 ? true : null })) }), /a yes\/no question cannot abstain with an option named "false"/],
  ['a score question', 422, body({ examples: examples(30, 3, { type: 'score', criteria: ['low', 'high'] }) }), /abstention applies to choice and yes\/no questions, not to score questions/],
  ['an answer that is no key', 422, withExample(1, (e) => ((e.answer = 'legal'), e)), /examples\.1\.answer: must be one of the option keys \("billing", "sales", "shipping", "support"\), or null \(unanswerable\), got "legal"/],
  ['a yes/no answer "maybe"', 422, body({ examples: examples(30, 3, { type: 'noul' }).map((e, i) => ({ ...e, answer: i === 0 ? 'maybe' : i % 3 ? true : null })) }), /examples\.0\.answer: must be true or false, or null/],
  ['too few unanswerable examples', 422, body({ examples: examples(36, 4).slice(0, 33) }), /at least 10 unanswerable examples \(answer null or "none of these"\), got 9/],
  ['too few answerable examples', 422, body({ examples: good.map((e, i) => ({ ...e, answer: i < 9 ? 'billing' : null })) }), /at least 10 answerable examples \(answer an option key\), got 9/],
  ['two questions', 422, withExample(2, (e) => ((e.request.questions.r = priorQuestion), e)), /examples\.2\.request\.questions: must hold exactly one question, got 2/],
  ['a different option list', 422, withExample(4, (e) => ((e.request.questions.q = unsure), e)), /examples\.4\.request\.questions\.q: asks a different question than example 0: its options differ/],
  ['imajev_extension without images', 422, body({ match: 'imajev_extension' }), /examples\.0\.request\.images: imajev_extension examples use the image extension/],
  ['option_set examples with images', 422, withExample(5, (e) => ((e.request.images = [PNG_1x1]), e)), /examples\.5\.request\.images: option_set examples are text questions .*imajev_extension/],
  ['imajev_extension examples without an image engine', 400, body({ match: 'imajev_extension', examples: good.map((e) => ({ ...e, request: { ...e.request, images: [PNG_1x1] } })) }), /examples with images: this server has no image engine: images need a server started with --image-model/],
  ['the option set of another abstention task', 422, body({ id: 'other' }), /another abstention task, "tickets", holds this option set with match "option_set"/],
  ['256 options', 400, body({ examples: examples(30, 3, { type: 'choice', criteria: Object.fromEntries(Array.from({ length: 256 }, (_, k) => [`k${k}`, null])) }) }), /example 0: 256 options: a question may have at most 255/],
];

test.each(registrations)('registration with %s → %i with a detail', async (_name, status, b, detail) => {
  const r = await server.post('/v1/abstention/tasks', b);
  expect(r.status).toBe(status);
  if (status === 422 && Array.isArray(r.body.detail)) expectProblems(r.body);
  expect(detailText(r.body)).toMatch(detail);
});

test('an example over the context: 422 naming the example', async () => {
  const long = keywordExamples(30).map((e, i) => ({ ...e, answer: i % 3 ? e.answer : null }));
  long[3].request.state = 'a' + ' a'.repeat(33_000);
  const r = await server.post('/v1/abstention/tasks', { id: 'long', option: { append: 'none' }, examples: long });
  expect(r.status).toBe(422);
  expect(r.body.detail).toMatch(/^example 3: the rendered prompt is longer than the context: 33\d{3} tokens, the context holds 32768/);
});

const full = () => structuredClone(stored.abstention_tasks[0]);
const imports: [string, () => unknown, RegExp][] = [
  ['abstention_tasks an object', () => ({ abstention_tasks: {} }), /body\.tasks: must be an array .*abstention_tasks/],
  ['an unknown match', () => ({ abstention_tasks: [{ ...full(), match: 'any' }] }), /abstention_tasks\.0\.match: must be one of/],
  ['both key and append', () => ({ abstention_tasks: [{ ...full(), option: { key: 'a', append: 'b' } }] }), /abstention_tasks\.0\.option: must be \{key: string\} or \{append: string\}/],
  ['an abstain option that is not the option\'s', () => ({ abstention_tasks: [{ ...full(), abstain_option: { key: 'other', description: null } }] }), /abstain_option\.key: must be the option's key or appended text/],
  ['a match key that does not match', () => ({ abstention_tasks: [{ ...full(), match_key: '0'.repeat(32) }] }), /abstention_tasks\.0\.match_key: does not match/],
  ['a threshold above 1', () => ({ abstention_tasks: [{ ...full(), applied: true, threshold: 1.5 }] }), /threshold: must be a number from 0 to 1 when applied/],
  ['a score type', () => ({ abstention_tasks: [{ ...full(), type: 'score' }] }), /abstention_tasks\.0\.type: must be "noul" or "choice"/],
  ['a repeated id', () => ({ abstention_tasks: [full(), full()] }), /abstention_tasks\.1\.id: repeats the id "tickets"/],
];

test.each(imports)('import with %s → 422 naming it', async (_name, b, detail) => {
  const r = await server.post('/v1/tasks/import', b());
  expect(r.status).toBe(422);
  expectProblems(r.body);
  expect(detailText(r.body)).toMatch(detail);
});

test('after every bad registration and import nothing stored changed (the file neither), and the server answers', async () => {
  expect((await server.get('/v1/tasks?full=1')).body).toEqual(stored);
  expect(fs.readFileSync(file).equals(storedFile)).toBe(true);
  const r = await server.post('/v1/systemone', { state: 'Ticket: refund please', questions: { d: priorQuestion } });
  expect(r.status).toBe(200);
});
