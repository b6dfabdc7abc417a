/** /v1/answer (the engine's own form) and the `decide` command, against the main route. */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { FLAGS_DECIDE_REFUSES } from '../../src/cli/decide';
import { flagDefs } from '../../src/config/flags';
import { logSoftmax } from '../helpers/reference';
import { expectProblems, runDecide, serverForFile } from '../helpers/server';

const state = 'The invoice of March was paid twice; the customer asked for a refund of the second payment.';
// No prefix cache: the two routes' readouts of one question are then the same computation, exactly.
const server = serverForFile(['--temperature-choice', '0.7', '--temperature-score', '1.3', '--prefix-cache', 'off']);

/** Label log-probabilities at temperature t. */
const logSoftmaxAt = (xs: number[], t: number) => logSoftmax(xs.map((x) => x / t));

test('/v1/answer answers each kind with options, probabilities, the raw readout and timing', async () => {
  const r = await server.post('/v1/answer', {
    state,
    questions: [
      { kind: 'noul', instructions: 'Was the invoice paid twice?' },
      { kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'], descriptions: ['money back', null, null] },
      { kind: 'score', instructions: 'How upset is the customer?', options: ['calm', 'annoyed', 'angry'] },
    ],
  });
  expect(r.status).toBe(200);
  const [noul, choice, score] = r.body.answers;
  expect(noul.options).toEqual(['yes', 'no']);
  expect(choice.options).toEqual(['refund', 'discount', 'nothing']);
  expect(score.options).toEqual(['calm', 'annoyed', 'angry']);
  for (const a of r.body.answers) {
    expect(a.probabilities.reduce((x: number, y: number) => x + y, 0)).toBeCloseTo(1, 12);
    expect(a.logits).toHaveLength(a.options.length);
    expect(a.label_token_ids).toHaveLength(a.options.length);
  }
  expect([noul.temperature, choice.temperature, score.temperature]).toEqual([1, 0.7, 1.3]);
  expect(r.body.timing).toMatchObject({ waited_ms: expect.any(Number), waited_behind_registration: false, engine_ms: expect.any(Number) });
  expect(r.body.timing.hop_ms).toBeGreaterThan(0); // the call and its reply crossed between two processes
  // The engine's host planning, measured apart: a part of the engine call.
  expect(r.body.timing.plan_ms).toBeGreaterThan(0);
  expect(r.body.timing.plan_ms).toBeLessThan(r.body.timing.engine_ms);
  // Alone, it waited behind no other call (its hand-over inside the engine process, longer on a busy machine, is the hop's).
  expect(r.body.timing.waited_ms).toBe(0);
});

test('/v1/systemone probabilities equal the label log-softmax of /v1/answer raw logits at the documented temperature', async () => {
  const options = ['refund', 'discount', 'nothing'];
  const a = await server.post('/v1/answer', { state, questions: [{ kind: 'choice', instructions: 'What does the customer want?', options }] });
  const s = await server.post('/v1/systemone', {
    state,
    questions: { want: { type: 'choice', instructions: 'What does the customer want?', criteria: { refund: null, discount: null, nothing: null } } },
  });
  const recomputed = logSoftmaxAt(a.body.answers[0].logits, 0.7).map(Math.exp);
  options.forEach((o, i) => expect(s.body.answers.want.probabilities[o]).toBeCloseTo(recomputed[i], 12));
  // And the temperature really applies: at T=1 they would differ.
  const plain = logSoftmaxAt(a.body.answers[0].logits, 1).map(Math.exp);
  expect(Math.max(...options.map((o, i) => Math.abs(s.body.answers.want.probabilities[o] - plain[i])))).toBeGreaterThan(1e-4);
});

test('/v1/answer validates its own form', async () => {
  const bad = [
    { state },
    { state, questions: [] },
    { state, questions: [{ kind: 'choice' }] },
    { state, questions: [{ kind: 'choice', options: ['a', 'a'] }] },
    { state, questions: [{ kind: 'rank', options: ['a'] }] },
  ];
  for (const body of bad) {
    const r = await server.post('/v1/answer', body);
    expect(r.status).toBe(422);
    expectProblems(r.body);
  }
  // Without `kind`, the problem named is `kind` (not the options a choice would need).
  expect((await server.post('/v1/answer', { state, questions: [{ instructions: 'x' }] })).body.detail).toEqual([
    { loc: ['body', 'questions', 0, 'kind'], msg: 'missing required field "kind"', type: 'missing' },
  ]);
});

test('decide answers a request file like the server, without a server', async () => {
  const body = {
    state,
    questions: { paid: { type: 'noul', instructions: 'Was it paid twice?' }, mood: { type: 'score', criteria: ['calm', 'annoyed', 'angry'] } },
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-decide-'));
  const file = path.join(dir, 'request.json');
  fs.writeFileSync(file, JSON.stringify(body));
  const { stdout: out } = await runDecide([file, '--base', 'tiny-qwen3', '--dtype', 'fp32', '--temperature-choice', '0.7', '--temperature-score', '1.3']);
  const served = await server.post('/v1/systemone', body);
  const decided = JSON.parse(out);
  expect(decided.model).toBe('tiny-qwen3');
  expect(decided.usage).toEqual(served.body.usage);
  expect(decided.answers.paid.noul).toBeCloseTo(served.body.answers.paid.noul, 6);
  expect(decided.answers.mood.score).toBeCloseTo(served.body.answers.mood.score, 6);
  // A malformed file gets the same 422 detail, on stdout, exit code 3.
  fs.writeFileSync(file, JSON.stringify({ state }));
  const { code: status, stdout } = await runDecide([file, '--base', 'tiny-qwen3']);
  expect(status).toBe(3);
  expect(JSON.parse(stdout).detail).toEqual([{ loc: ['body', 'questions'], msg: 'missing required field "questions"', type: 'missing' }]);
  // A server flag decide cannot honour is refused, named, never ignored (the list: FLAGS_DECIDE_REFUSES, every one a server flag).
  const refused = await runDecide([file, '--base', 'tiny-qwen3', '--port', '9000']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/--port is a server flag decide cannot honour: decide listens nowhere/);
  const names = flagDefs.map((d) => d.name);
  for (const name of Object.keys(FLAGS_DECIDE_REFUSES)) expect(names).toContain(name);
  fs.rmSync(dir, { recursive: true, force: true });
});
