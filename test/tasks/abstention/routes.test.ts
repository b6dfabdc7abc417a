/**
 * Abstention over HTTP (docs/abstention.md): --abstain-option and its default rule (choice and
 * yes/no), abstention tasks in both forms (append, key) composed with a head task, the threshold's
 * justification, probabilities byte-identical with and without a threshold, x-service-tasks,
 * GET /v1/abstention/tasks, /health, --abstention off, --tasks-file across a restart and a killed
 * process, export and import, the fingerprint, and match "imajev_extension".
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { blankAbstentionExamples, blankHeadExamples, blankState, CANT_TELL, codeQuestion } from '../../helpers/abstention';
import { runDecide, RunningServer, startServer } from '../../helpers/server';
import { keywordState, priorExamples, priorQuestion } from '../../helpers/tasks';

jest.setTimeout(300_000);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-abstention-'));
const file = path.join(dir, 'tasks.json');
let server: RunningServer;
let head: any;

beforeAll(async () => {
  server = await startServer(['--tasks-file', file, '--abstain-option', CANT_TELL, '--debug-readout']);
  head = await server.post('/v1/tasks', { id: 'blank-head', examples: blankHeadExamples(120, 60) });
});
afterAll(async () => {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ask = (s: RunningServer, state: string, question: object = codeQuestion(), headers: Record<string, string> = {}) => s.post('/v1/systemone', { state, questions: { q: question } }, headers);
const softmax = (logits: number[], t: number) => {
  const m = Math.max(...logits.map((l) => l / t));
  const e = logits.map((l) => Math.exp(l / t - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
};

describe('--abstain-option without a task: the default rule', () => {
  test('choice: unknown_probability is the appended option\'s, probabilities over the own keys divided by their share, abstained iff it is the most probable', async () => {
    let abstainedSeen = 0, answeredSeen = 0;
    for (let i = 0; i < 12; i++) {
      const question = { type: 'choice', instructions: 'Which fits?', criteria: { red: null, green: 'a colour', blue: null } };
      const r = await ask(server, `Item ${i}: ${'lorem ipsum '.repeat(i)}`, question, { 'x-service-debug': 'readout' });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-service-tasks')).toBeNull();
      const a = r.body.answers.q, ro = r.body.readout.q;
      // The appended option is read like the others: a fourth label, last.
      expect(ro.label_token_ids).toHaveLength(4);
      const p = softmax(ro.label_logits, ro.temperature);
      expect(a.unknown_probability).toBeCloseTo(p[3], 12);
      const own = p[0] + p[1] + p[2];
      expect(Object.keys(a.probabilities)).toEqual(['red', 'green', 'blue']);
      ['red', 'green', 'blue'].forEach((k, j) => expect(a.probabilities[k]).toBeCloseTo(p[j] / own, 12));
      expect(a.abstained).toBe(p[3] > Math.max(p[0], p[1], p[2]));
      const best = ['red', 'green', 'blue'].reduce((b, k) => (a.probabilities[k] > a.probabilities[b] ? k : b));
      expect(a.choice).toBe(best); // the best own key, even when abstaining
      a.abstained ? abstainedSeen++ : answeredSeen++;
    }
    expect(answeredSeen).toBeGreaterThan(0);
  });

  test('yes/no: lettered with the abstain option third; noul is P(yes) among yes and no', async () => {
    const r = await ask(server, 'The sky is green.', { type: 'noul', instructions: 'Is the sky green?' }, { 'x-service-debug': 'readout' });
    const a = r.body.answers.q, ro = r.body.readout.q;
    expect(ro.label_token_ids).toHaveLength(3);
    const p = softmax(ro.label_logits, ro.temperature);
    expect(a.noul).toBeCloseTo(p[0] / (p[0] + p[1]), 12);
    expect(a.unknown_probability).toBeCloseTo(p[2], 12);
    expect(a.abstained).toBe(p[2] > Math.max(p[0], p[1]));
    expect(Object.keys(a).sort()).toEqual(['abstained', 'noul', 'type', 'unknown_probability']);
  });

  test('score questions and /v1/answer are not extended', async () => {
    const r = await ask(server, 'x', { type: 'score', criteria: ['low', 'mid', 'high'] });
    expect(r.body.answers.q.unknown_probability).toBeUndefined();
    expect(r.body.answers.q.abstained).toBeUndefined();
    const e = await server.post('/v1/answer', { state: 'x', questions: [{ kind: 'choice', options: ['a', 'b'] }] });
    expect(e.body.answers[0].probabilities).toHaveLength(2);
  });

  test('a request that already has an option keyed with the text keeps it as its abstain option: nothing appended, its probability reported', async () => {
    const r = await ask(server, 'x', { type: 'choice', criteria: { a: null, b: null, [CANT_TELL]: null } }, { 'x-service-debug': 'readout' });
    const a = r.body.answers.q;
    expect(r.body.readout.q.label_token_ids).toHaveLength(3);
    expect(a.unknown_probability).toBe(a.probabilities[CANT_TELL]);
  });

  test('a task registered from plain examples is fitted on the question as served, the abstain option among its options, and applies', async () => {
    const r = await server.post('/v1/tasks', { id: 'prior', examples: priorExamples(40) });
    expect(r.status).toBe(200);
    expect(r.body.options.map((o: any) => o.key)).toEqual(['billing', CANT_TELL, 'sales', 'shipping', 'support']);
    expect(r.body.applied).toBe('calibration');
    const a = await ask(server, 'Ticket: refund please', priorQuestion);
    expect(a.headers.get('x-service-tasks')).toBe('prior');
    expect(Object.keys(a.body.answers.q.probabilities)).toEqual(['billing', 'shipping', 'support', 'sales']);
    expect((await server.delete('/v1/tasks/prior')).status).toBe(200);
  });

  test('/health shows the extension', async () => {
    const h = (await server.get('/health')).body.systemone.abstention;
    expect(h).toMatchObject({ abstain_option: CANT_TELL, thresholds_enabled: true });
    expect(h.default_rule).toMatch(/more probable than every other/);
  });
});

describe('an abstention task appending its option, over a head task', () => {
  let reg: any, before: any;
  const blankNote = blankState(7777);

  beforeAll(async () => {
    expect(head.status).toBe(200);
    expect(head.body.applied).toBe('head');
    // Before the abstention task: the head task applies to the question as asked with "can't tell" appended (--abstain-option).
    await ask(server, blankNote);
    before = await ask(server, blankNote);
    reg = await server.post('/v1/abstention/tasks', { id: 'blank', option: { append: CANT_TELL }, match: 'option_set', examples: blankAbstentionExamples(40, 40) });
  });

  test('the record: a justified threshold, accuracy and coverage with and without it, the counts, the task it was fitted over', () => {
    expect(reg.status).toBe(200);
    const t = reg.body;
    expect(t).toMatchObject({ id: 'blank', match: 'option_set', option: { append: CANT_TELL }, applied: true, replaced: false, fitted_with: expect.stringMatching(/^blank-head@[0-9a-f]{16}:head$/) });
    expect(t.options.map((o: any) => o.key)).not.toContain(CANT_TELL);
    const r = t.record;
    expect(r).toMatchObject({ n: 80, answerable: 40, unanswerable: 40, applied: true, folds: { outer: 5, repeats: 3 } });
    expect(t.threshold).toBe(r.fitted_threshold);
    expect(r.evidence.vs_never.t).toBeGreaterThanOrEqual(2);
    expect(r.evidence.vs_default.gain).toBeGreaterThanOrEqual(0.01);
    expect(r.evidence.vs_default.t).toBeGreaterThanOrEqual(2);
    for (const where of ['cross_validated', 'in_sample']) for (const rule of ['threshold', 'never', 'default']) expect(Object.keys(r[where][rule]).sort()).toEqual(['accuracy', 'coverage', 'selective_accuracy']);
    expect(r.cross_validated.threshold.accuracy).toBeGreaterThan(r.cross_validated.never.accuracy);
    expect(r.cross_validated.never.coverage).toBe(1);
  });

  test('a blank note abstains, a named word is answered; the probabilities are byte-identical to those without the threshold', async () => {
    const r = await ask(server, blankNote);
    expect(r.headers.get('x-service-tasks')).toBe('blank-head,abstention:blank');
    const a = r.body.answers.q, b = before.body.answers.q;
    expect(a.abstained).toBe(true);
    expect(b.abstained).toBe(false); // the default rule answered it
    expect(JSON.stringify(a.probabilities)).toBe(JSON.stringify(b.probabilities));
    expect(a.unknown_probability).toBe(b.unknown_probability);
    expect(a.unknown_probability).toBeGreaterThan(reg.body.threshold);
    expect(a.choice).toBe(b.choice);
    const named = await ask(server, keywordState('delta', 7778));
    expect(named.body.answers.q).toMatchObject({ abstained: false, choice: 'delta' });
    expect(named.body.answers.q.unknown_probability).toBeLessThanOrEqual(reg.body.threshold);
  });

  test('GET /v1/abstention/tasks and /health list it as applied', async () => {
    const l = await server.get('/v1/abstention/tasks');
    expect(l.body).toMatchObject({ enabled: true, abstain_option: CANT_TELL, fingerprint: head.body.fingerprint });
    expect(l.body.tasks.map((t: any) => [t.id, t.applied])).toContainEqual(['blank', true]);
    const h = (await server.get('/health')).body.systemone.abstention;
    expect(h.tasks.applied).toContain('blank');
  });

  test('a threshold is used only over the task it was fitted over: with that task gone, the default rule decides', async () => {
    const full = (await server.get('/v1/tasks?full=1')).body;
    const headTask = full.tasks.find((t: any) => t.id === 'blank-head');
    expect((await server.delete('/v1/tasks/blank-head')).status).toBe(200);
    const r = await ask(server, blankNote);
    expect(r.headers.get('x-service-tasks')).toBeNull();
    expect(r.body.answers.q.abstained).toBe(r.body.answers.q.unknown_probability > Math.max(...Object.values(r.body.answers.q.probabilities as Record<string, number>).map((p) => p * (1 - r.body.answers.q.unknown_probability))));
    expect((await server.post('/v1/tasks/import', { tasks: [headTask] })).body.loaded).toEqual(['blank-head']);
    expect((await ask(server, blankNote)).headers.get('x-service-tasks')).toBe('blank-head,abstention:blank');
  });
});

describe('not justified, key form, persistence, import, --abstention off, imajev_extension', () => {
  test('answerability independent of the text: stored (replacing the task of that id), not applied, the question answered as without it', async () => {
    // Notes that name a code word, 30% of them labelled unanswerable whatever they say: the head answers
    // most of them right, and u says nothing about the label. (With half labelled null, abstaining on
    // all would beat answering an imperfect model: a threshold below every score is then justified.)
    const examples = blankAbstentionExamples(80, 0, 6000).map((e, i) => ({ ...e, answer: (i * 7) % 10 < 3 ? null : e.answer }));
    const r = await server.post('/v1/abstention/tasks', { id: 'blank', option: { append: CANT_TELL }, examples });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ replaced: true, applied: false, threshold: null });
    expect(r.body.record.reason).toMatch(/^not justified: /);
    expect(r.body.record.unanswerable).toBe(24);
    const a = await ask(server, blankState(7777));
    expect(a.headers.get('x-service-tasks')).toBe('blank-head');
    expect((await server.get('/v1/abstention/tasks')).body.tasks.find((t: any) => t.id === 'blank').applied).toBe(false);
  });

  test('key form: the requests\' own "can\'t tell"; abstaining answers that key; probabilities keep it, byte-identical without the threshold', async () => {
    const withKey = codeQuestion([CANT_TELL]);
    const blankNote = blankState(8888);
    // One abstention task per option set: the append-form one goes first.
    expect((await server.delete('/v1/abstention/tasks/blank')).status).toBe(200);
    await ask(server, blankNote, withKey);
    const before = await ask(server, blankNote, withKey);
    const reg = await server.post('/v1/abstention/tasks', { id: 'blank-key', option: { key: CANT_TELL }, examples: blankAbstentionExamples(40, 40, 2000, [CANT_TELL]) });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({ applied: true, match: 'option_set', abstain_option: { key: CANT_TELL, description: null } });
    const r = await ask(server, blankNote, withKey);
    expect(r.headers.get('x-service-tasks')).toBe('blank-head,abstention:blank-key');
    const a = r.body.answers.q, b = before.body.answers.q;
    expect(a).toMatchObject({ abstained: true, choice: CANT_TELL });
    expect(b.abstained).toBe(false);
    expect(JSON.stringify(a.probabilities)).toBe(JSON.stringify(b.probabilities));
    expect(a.unknown_probability).toBe(a.probabilities[CANT_TELL]);
    expect(Object.keys(a.probabilities)).toContain(CANT_TELL);
    // A request without the key does not match the key-form task: --abstain-option's default rule.
    const plain = await ask(server, blankNote);
    expect(plain.headers.get('x-service-tasks')).toBe('blank-head');
  });

  test('decide applies the abstention tasks of --tasks-file and --abstain-option as the server does', async () => {
    const body = { state: blankState(8888), questions: { q: codeQuestion([CANT_TELL]), n: { type: 'noul' } } };
    const request = path.join(dir, 'request.json');
    fs.writeFileSync(request, JSON.stringify(body));
    const { stdout } = await runDecide([request, '--base', 'tiny-qwen3', '--dtype', 'fp32', '--tasks-file', file, '--abstain-option', CANT_TELL]);
    const decided = JSON.parse(stdout);
    expect(decided.answers.q).toMatchObject({ abstained: true, choice: CANT_TELL });
    expect(decided).toEqual((await server.post('/v1/systemone', body)).body);
  });

  test('--tasks-file: a restart and a killed process keep the abstention tasks; --abstention off answers with the default rule and the same probabilities', async () => {
    const blankNote = blankState(8888), withKey = codeQuestion([CANT_TELL]);
    const live = await ask(server, blankNote, withKey);
    const copy = path.join(dir, 'copy.json');
    fs.copyFileSync(file, copy);
    const killed = await startServer(['--tasks-file', copy, '--abstain-option', CANT_TELL]);
    const listed = (await killed.get('/v1/abstention/tasks')).body.tasks;
    expect(listed.map((t: any) => t.id)).toEqual(['blank-key']);
    // A change made just before a SIGKILL is kept: blank-key stored again as "extra".
    const stored = (await killed.get('/v1/tasks?full=1')).body.abstention_tasks[0];
    expect((await killed.delete('/v1/abstention/tasks/blank-key')).status).toBe(200);
    expect((await killed.post('/v1/tasks/import', { abstention_tasks: [{ ...stored, id: 'extra' }] })).body.abstention.loaded).toEqual(['extra']);
    killed.process.kill('SIGKILL');
    await killed.exited;
    const [again, off] = await Promise.all([startServer(['--tasks-file', copy, '--abstain-option', CANT_TELL]), startServer(['--tasks-file', file, '--abstain-option', CANT_TELL, '--abstention', 'off'])]);
    try {
      expect((await again.get('/v1/abstention/tasks')).body.tasks.map((t: any) => t.id)).toEqual(['extra']);
      const r = await ask(again, blankNote, withKey);
      expect(r.body).toEqual(live.body);
      expect(r.headers.get('x-service-tasks')).toBe('blank-head,abstention:extra');
      const o = await ask(off, blankNote, withKey);
      expect(o.headers.get('x-service-tasks')).toBe('blank-head');
      expect(o.body.answers.q.abstained).toBe(false);
      expect(JSON.stringify(o.body.answers.q.probabilities)).toBe(JSON.stringify(live.body.answers.q.probabilities));
      expect((await off.get('/v1/abstention/tasks')).body.enabled).toBe(false);
      expect((await off.get('/health')).body.systemone.abstention.tasks.applied).toEqual([]);
    } finally {
      await Promise.all([again.stop(), off.stop()]);
    }
  });

  test('export and import: the same answers on a fresh server; another rendering refuses them, naming it', async () => {
    const full = (await server.get('/v1/tasks?full=1')).body;
    expect(full.abstention_tasks.map((t: any) => t.id)).toEqual(['blank-key']);
    const blankNote = blankState(8888), withKey = codeQuestion([CANT_TELL]);
    const live = await ask(server, blankNote, withKey);
    const [fresh, other] = await Promise.all([startServer(['--abstain-option', CANT_TELL]), startServer(['--layout', 'question-first'])]);
    try {
      const imported = await fresh.post('/v1/tasks/import', { tasks: full.tasks, abstention_tasks: full.abstention_tasks });
      expect(imported.body.abstention).toEqual({ loaded: ['blank-key'], refused: [] });
      expect((await ask(fresh, blankNote, withKey)).body).toEqual(live.body);
      const refused = await other.post('/v1/tasks/import', { abstention_tasks: full.abstention_tasks });
      expect(refused.status).toBe(200);
      expect(refused.body.abstention.loaded).toEqual([]);
      expect(refused.body.abstention.refused[0].reason).toMatch(/differing: rendering/);
      expect((await other.get('/v1/abstention/tasks')).body.tasks).toEqual([]);
    } finally {
      await Promise.all([fresh.stop(), other.stop()]);
    }
  });

  test('match "imajev_extension": examples with images get 400 naming the missing image engine; an imported one is refused, naming it', async () => {
    const image = 'data:image/png;base64,iVBORw0KGgo=';
    const examples = blankAbstentionExamples(10, 10, 5000).map((e) => ({ ...e, request: { ...e.request, images: [image] } }));
    const r = await server.post('/v1/abstention/tasks', { id: 'pictures', option: { append: CANT_TELL }, match: 'imajev_extension', examples });
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(/no image engine.*--image-model/);
    const full = (await server.get('/v1/tasks?full=1')).body;
    const asImage = { ...full.abstention_tasks.find((t: any) => t.id === 'blank-key'), id: 'blank-key-images', match: 'imajev_extension' };
    const imported = await server.post('/v1/tasks/import', { abstention_tasks: [asImage] });
    expect(imported.body.abstention.loaded).toEqual([]);
    expect(imported.body.abstention.refused).toEqual([{ id: 'blank-key-images', reason: 'an image-route abstention task (match imajev_extension) needs a server started with --image-model' }]);
    const a = await ask(server, blankState(8888), codeQuestion([CANT_TELL]));
    expect(a.headers.get('x-service-tasks')).toBe('blank-head,abstention:blank-key');
  });
});
