/**
 * Tasks over HTTP (docs/tasks.md): registration and its record, application and
 * x-service-tasks, list/full/delete/import, the fingerprint, --tasks off, --tasks-file
 * across a restart and a killed process, serving during a registration.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { codeWords, keywordExamples, keywordQuestion, keywordState, priorExamples, priorQuestion, unexplainedParts } from '../helpers/tasks';
import { int8KernelAt } from '../helpers/cpu';
import { detailText, runDecide, RunningServer, startServer } from '../helpers/server';

jest.setTimeout(300_000);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-tasks-'));
const file = path.join(dir, 'tasks.json');
let server: RunningServer;
let keyword: any, prior: any;

beforeAll(async () => {
  server = await startServer(['--tasks-file', file]);
  keyword = await server.post('/v1/tasks', { id: 'keyword', examples: keywordExamples(120) });
  prior = await server.post('/v1/tasks', { id: 'prior', examples: priorExamples(120) });
});
afterAll(async () => {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ask = (state: string, question: object = keywordQuestion()) => server.post('/v1/systemone', { state, questions: { q: question } });

describe('registration', () => {
  test('the keyword task: the head is kept on evidence, and the record says what was fitted, applied and why', () => {
    expect(keyword.status).toBe(200);
    const t = keyword.body;
    expect(t.id).toBe('keyword');
    expect(t.applied).toBe('head');
    expect(t.options.map((o: any) => o.key)).toEqual([...codeWords].sort());
    const r = t.record;
    expect(r.n).toBe(120);
    expect(Object.values(r.counts)).toEqual(new Array(12).fill(10));
    expect(r.folds).toMatchObject({ outer: 5, calibration_repeats: 3, inner: 3 });
    expect(r.head).toMatchObject({ fitted: true, applied: true });
    // The calibration is applied inside a residual head, superseded by a replacing one; its own verdict stays beside it.
    if (r.head.hyper.form === 'residual') expect(r.calibration).toMatchObject({ fitted: true, applied: true, applied_as: expect.stringMatching(/^inside the head/) });
    else expect(r.calibration).toMatchObject({ fitted: true, applied: false, reason: expect.stringMatching(/^superseded by the head/) });
    expect(typeof r.calibration.kept_alone).toBe('boolean');
    expect(r.head.evidence.t).toBeGreaterThanOrEqual(2);
    expect(r.head.evidence.gain).toBeGreaterThan(0.5);
    // Random weights: the readout is near chance, the head reads the keyword from the hidden state.
    expect(r.metrics.baseline.accuracy).toBeLessThan(0.3);
    expect(r.metrics.head.accuracy).toBeGreaterThan(0.6);
    expect(r.metrics.applied).toEqual(r.metrics.head);
    for (const m of ['baseline', 'calibration', 'head']) expect(Object.keys(r.metrics[m]).sort()).toEqual(['accuracy', 'brier', 'ece', 'nll']);
    expect(r.fit_ms).toBeGreaterThan(0);
    expect(t.fingerprint).toMatch(/^[0-9a-f]{32}$/);
  });

  test('the class-prior task: calibration kept, the head not fitted with the reason', () => {
    expect(prior.status).toBe(200);
    const r = prior.body.record;
    expect(prior.body.applied).toBe('calibration');
    expect(r.calibration.applied).toBe(true);
    expect(r.metrics.calibration.nll).toBeLessThan(r.metrics.baseline.nll - 0.1);
    expect(r.head).toEqual({ fitted: false, applied: false, reason: 'fewer than 10 options (4)' });
  });

  test('random labels: nothing applied, with the evidence in the reason', async () => {
    const examples = keywordExamples(40, 500).map((e, i) => ({ ...e, request: { ...e.request, questions: { q: { ...keywordQuestion(), instructions: 'Pick one at random.' } } }, answer: i % 2 ? 'alpha' : 'bravo' }));
    // Labels alternate independently of the text; the question differs from "keyword" (its instructions only: the options are the same, so it is held).
    const held = await server.post('/v1/tasks', { id: 'random', examples });
    expect(held.status).toBe(422);
    expect(detailText(held.body)).toContain('"keyword"');
    const noul = Array.from({ length: 40 }, (_, i) => ({ request: { state: `Item ${i} ${(i * 7919) % 101}`, questions: { n: { type: 'noul', instructions: 'Is it red?' } } }, answer: (i * 7) % 3 === 0 }));
    const r = await server.post('/v1/tasks', { id: 'coin', examples: noul });
    expect(r.status).toBe(200);
    expect(r.body.applied).toBe('none');
    expect(r.body.record.calibration).toMatchObject({ applied: false, kept_alone: false, reason: expect.stringMatching(/ΔNLL [-+]\d\.\d{4} ± \d\.\d{4}/) });
    expect(r.body.record.head).toEqual({ fitted: false, applied: false, reason: 'fewer than 10 options (2)' });
    expect((await server.delete('/v1/tasks/coin')).status).toBe(200);
  });

  test('the same id again replaces the task', async () => {
    const again = await server.post('/v1/tasks', { id: 'prior', examples: priorExamples(100, 9) });
    expect(again.status).toBe(200);
    expect(again.body.replaced).toBe(true);
    expect(again.body.record.n).toBe(100);
    const list = (await server.get('/v1/tasks')).body;
    expect(list.tasks.filter((t: any) => t.id === 'prior')).toHaveLength(1);
    expect(list.tasks.find((t: any) => t.id === 'prior').record.n).toBe(100);
  });
});

describe('application', () => {
  test('a matching question is answered with the task, whatever its key order and wording; x-service-tasks names it', async () => {
    const state = keywordState('kilo', 9999);
    const r = await ask(state);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-service-tasks')).toBe('keyword');
    expect(r.body.answers.q.choice).toBe('kilo');
    expect(r.body.answers.q.probabilities.kilo).toBeGreaterThan(0.5);
    // The keys in another order: the question is put to the model in the task's order, so the answer is the same.
    const reversed = { ...keywordQuestion(), criteria: Object.fromEntries([...codeWords].reverse().map((k) => [k, null])) };
    const r2 = await ask(state, reversed);
    expect(r2.headers.get('x-service-tasks')).toBe('keyword');
    expect(Object.keys(r2.body.answers.q.probabilities)).toEqual([...codeWords].reverse());
    for (const k of codeWords) expect(r2.body.answers.q.probabilities[k]).toBe(r.body.answers.q.probabilities[k]);
    // Other wording, same type and option list: the task applies (the spec's rule), its head reading this wording's hidden state.
    const reworded = await ask(state, { ...keywordQuestion(), instructions: 'Name the code word.' });
    expect(reworded.headers.get('x-service-tasks')).toBe('keyword');
  });

  test('options differing in one description are untouched, and so are other questions', async () => {
    const state = keywordState('kilo', 9999);
    const changed = keywordQuestion();
    (changed.criteria as any).kilo = 'a unit of weight';
    const r = await ask(state, changed);
    expect(r.headers.get('x-service-tasks')).toBeNull();
    expect(r.body.answers.q.probabilities.kilo).toBeLessThan(0.5);
    const other = await server.post('/v1/systemone', { state, questions: { n: { type: 'noul' } } });
    expect(other.headers.get('x-service-tasks')).toBeNull();
  });

  test('several questions: each matching one is tasked, the header names each task once', async () => {
    const r = await server.post('/v1/systemone', { state: keywordState('golf', 4242), questions: { a: keywordQuestion(), b: priorQuestion, c: { type: 'noul' } } });
    expect(r.headers.get('x-service-tasks')!.split(',').sort()).toEqual(['keyword', 'prior']);
    expect(r.body.answers.a.choice).toBe('golf');
  });

  test('the engine route applies tasks too', async () => {
    const r = await server.post('/v1/answer', { state: keywordState('echo', 31), questions: [{ kind: 'choice', instructions: keywordQuestion().instructions, options: codeWords }] });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-service-tasks')).toBe('keyword');
    const p = r.body.answers[0].probabilities;
    expect(codeWords[p.indexOf(Math.max(...p))]).toBe('echo');
  });

  test('orders: 2 applies the task to the averaged readout', async () => {
    const r = await server.post('/v1/systemone', { state: keywordState('lima', 77), questions: { q: keywordQuestion() }, orders: 2 });
    expect(r.headers.get('x-service-tasks')).toBe('keyword');
    expect(r.body.answers.q.choice).toBe('lima');
  });
});

describe('management and persistence', () => {
  test('list, full export, fingerprint and health', async () => {
    const list = (await server.get('/v1/tasks')).body;
    expect(list.enabled).toBe(true);
    expect(list.tasks.map((t: any) => t.id).sort()).toEqual(['keyword', 'prior']);
    expect(list.tasks[0].head).toBeUndefined();
    expect(list.head_engine).toMatchObject({ engine: 'serving engine', hidden_size: 64 });
    expect(Object.keys(list.fingerprint_components).sort()).toEqual(['format', 'head_engine', 'model', 'readout', 'rendering', 'tokenizer']);
    expect(list.tasks.flatMap(unexplainedParts)).toEqual([]);
    const full = (await server.get('/v1/tasks?full=1')).body;
    expect(full.format).toBe('tqserve-tasks/1');
    expect(full.tasks.flatMap(unexplainedParts)).toEqual([]);
    const k = full.tasks.find((t: any) => t.id === 'keyword');
    expect(k.head.W.shape).toEqual([12, 64]);
    expect(Buffer.from(k.head.W.data, 'base64').length).toBe(12 * 64 * 4);
    const health = (await server.get('/health')).body;
    expect(health.systemone.tasks).toMatchObject({ enabled: true, registered: 2, fingerprint: list.fingerprint });
    expect(health.systemone.tasks.applied.sort()).toEqual(['keyword', 'prior']);
    expect(health.head_engine.engine).toBe('serving engine');
  });

  test('export, delete, import: identical probabilities; delete of an absent id is 404', async () => {
    const state = keywordState('bravo', 123);
    const before = await ask(state);
    const full = (await server.get('/v1/tasks?full=1')).body;
    expect((await server.delete('/v1/tasks/keyword')).status).toBe(200);
    const absent = await server.delete('/v1/tasks/keyword');
    expect(absent.status).toBe(404);
    expect(absent.body.detail).toContain('keyword');
    const untasked = await ask(state);
    expect(untasked.headers.get('x-service-tasks')).toBeNull();
    const imported = await server.post('/v1/tasks/import', { tasks: full.tasks.filter((t: any) => t.id === 'keyword') });
    expect(imported.status).toBe(200);
    expect(imported.body).toEqual({ loaded: ['keyword'], refused: [] });
    const after = await ask(state);
    expect(after.headers.get('x-service-tasks')).toBe('keyword');
    for (const k of codeWords) expect(Math.abs(after.body.answers.q.probabilities[k] - before.body.answers.q.probabilities[k])).toBeLessThanOrEqual(1e-6);
    const listed = (await server.get('/v1/tasks')).body.tasks.find((t: any) => t.id === 'keyword');
    expect(listed.record).toEqual(full.tasks.find((t: any) => t.id === 'keyword').record);
  });

  test('an export whose record does not say why (an older server\'s, or edited) reads with the reasons after import', async () => {
    const full = (await server.get('/v1/tasks?full=1')).body;
    const keyword = full.tasks.find((t: any) => t.id === 'keyword');
    const bare = (part: any) => ({ fitted: part.fitted, applied: part.applied, evidence: part.evidence });
    const imports: [object, object][] = [
      // A replacing head: the calibration is superseded.
      [{ ...keyword, head: { ...keyword.head, form: 'replace' }, record: { ...keyword.record, calibration: { ...bare(keyword.record.calibration), applied: true }, head: bare(keyword.record.head) } },
        { calibration: { applied: false, reason: expect.stringMatching(/^superseded by the head/) }, head: { applied: true } }],
      // Nothing applied: both parts say they were not kept.
      [{ ...keyword, applied: 'none', record: { ...keyword.record, calibration: { ...bare(keyword.record.calibration), applied: false }, head: bare(keyword.record.head) } },
        { calibration: { applied: false, kept_alone: false, reason: expect.stringMatching(/not large and significant enough/) }, head: { applied: false, reason: expect.stringMatching(/not large and significant enough/) } }],
    ];
    try {
      for (const [task, parts] of imports) {
        expect((await server.post('/v1/tasks/import', { tasks: [task] })).body).toEqual({ loaded: ['keyword'], refused: [] });
        const listed = (await server.get('/v1/tasks')).body.tasks.find((t: any) => t.id === 'keyword');
        expect(listed.record).toMatchObject(parts);
        expect(unexplainedParts(listed)).toEqual([]);
      }
    } finally {
      expect((await server.post('/v1/tasks/import', { tasks: [keyword] })).body).toEqual({ loaded: ['keyword'], refused: [] });
    }
  });

  test('the file survives a restart with --tasks off (kept, listed, not applied) and a killed process', async () => {
    const full = (await server.get('/v1/tasks?full=1')).body;
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).tasks.map((t: any) => t.id).sort()).toEqual(['keyword', 'prior']);
    const copy = path.join(dir, 'copy.json');
    fs.copyFileSync(file, copy);
    const off = await startServer(['--tasks-file', copy, '--tasks', 'off']);
    try {
      const list = (await off.get('/v1/tasks?full=1')).body;
      expect(list.enabled).toBe(false);
      expect(list.tasks).toEqual(full.tasks);
      const r = await off.post('/v1/systemone', { state: keywordState('kilo', 9999), questions: { q: keywordQuestion() } });
      expect(r.headers.get('x-service-tasks')).toBeNull();
      expect((await off.get('/health')).body.systemone.tasks.enabled).toBe(false);
    } finally {
      await off.stop();
    }
    // Killed without warning after a change: the next server loads what the last change stored.
    const killed = await startServer(['--tasks-file', copy]);
    await killed.delete('/v1/tasks/prior');
    killed.process.kill('SIGKILL');
    await killed.exited;
    const next = await startServer(['--tasks-file', copy]);
    try {
      const list = (await next.get('/v1/tasks?full=1')).body;
      expect(list.tasks.map((t: any) => t.id)).toEqual(['keyword']);
      expect(list.tasks[0]).toEqual(full.tasks.find((t: any) => t.id === 'keyword'));
      expect(list.refused_at_start).toEqual([]);
    } finally {
      await next.stop();
    }
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  test('concurrent changes are serialized: the file always holds the last state', async () => {
    const full = (await server.get('/v1/tasks?full=1')).body;
    const k = full.tasks.find((t: any) => t.id === 'keyword');
    const copies = Array.from({ length: 6 }, (_, i) => ({ ...k, id: `copy-${i}` }));
    // Each copy holds keyword's question: only after keyword is deleted can one be imported, and then only one at a time.
    const results = await Promise.all([server.delete('/v1/tasks/keyword'), ...copies.map((c) => server.post('/v1/tasks/import', { tasks: [c] }))]);
    const loaded = results.slice(1).flatMap((r) => r.body.loaded);
    expect(loaded).toHaveLength(1);
    const now = (await server.get('/v1/tasks?full=1')).body;
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).tasks).toEqual(now.tasks);
    await server.delete(`/v1/tasks/${loaded[0]}`);
    expect((await server.post('/v1/tasks/import', { tasks: [k] })).body.loaded).toEqual(['keyword']);
  });

  test('decide applies a --tasks-file as the server does', async () => {
    const request = { state: keywordState('delta', 8080), questions: { q: keywordQuestion(), d: priorQuestion } };
    const served = await server.post('/v1/systemone', request);
    const req = path.join(dir, 'request.json');
    fs.writeFileSync(req, JSON.stringify(request));
    const { stdout } = await runDecide([req, '--base', 'tiny-qwen3', '--dtype', 'fp32', '--tasks-file', file]);
    const decided = JSON.parse(stdout);
    for (const name of ['q', 'd'])
      for (const [k, v] of Object.entries(served.body.answers[name].probabilities)) expect(Math.abs((decided.answers[name].probabilities[k] as number) - (v as number))).toBeLessThanOrEqual(1e-6);
  });

  test('a server with another rendering refuses the tasks, naming the component, at start and on import', async () => {
    const copy = path.join(dir, 'other.json');
    fs.copyFileSync(file, copy);
    const other = await startServer(['--tasks-file', copy, '--choice-labels', 'digits']);
    try {
      const list = (await other.get('/v1/tasks')).body;
      expect(list.tasks).toEqual([]);
      expect(list.refused_at_start.map((r: any) => r.id).sort()).toEqual(['keyword', 'prior']);
      expect(list.refused_at_start[0].reason).toMatch(/differing: rendering/);
      const full = (await server.get('/v1/tasks?full=1')).body;
      const r = await other.post('/v1/tasks/import', { tasks: full.tasks });
      expect(r.status).toBe(200);
      expect(r.body.loaded).toEqual([]);
      expect(r.body.refused.map((x: any) => x.reason)).toEqual([expect.stringMatching(/differing: rendering/), expect.stringMatching(/differing: rendering/)]);
      // The refused start did not rewrite its file.
      expect(JSON.parse(fs.readFileSync(copy, 'utf8')).tasks).toHaveLength(2);
    } finally {
      await other.stop();
    }
  });

  test('int8 weights: /health and /metrics say so, and tasks are refused across quantizations, both ways', async () => {
    const copy = path.join(dir, 'int8.json');
    fs.copyFileSync(file, copy);
    const int8 = await startServer(['--tasks-file', copy, '--quantization', 'int8']);
    try {
      const health = (await int8.get('/health')).body;
      // The kernel of the level the engine measured fastest (on a machine busy with the other tests, not always the highest).
      expect(health).toMatchObject({ quantization: 'int8', quantized_kernels: int8KernelAt(health.kernels) });
      expect(health.linear_weight_bytes).toBeGreaterThan(0);
      expect((await int8.get('/metrics')).body).toMatch(/tqserve_engine_info\{engine="text",dtype="fp32",kernels="[^"]+",quantization="int8"\} 1/);
      const list = (await int8.get('/v1/tasks')).body;
      expect(list.refused_at_start.map((r: any) => r.id).sort()).toEqual(['keyword', 'prior']);
      expect(list.refused_at_start[0].reason).toMatch(/differing: quantization/);
      // And a task fitted under int8 is refused by the server without quantization.
      expect((await int8.post('/v1/tasks', { id: 'prior-int8', examples: priorExamples(60) })).status).toBe(200);
      const fitted = (await int8.get('/v1/tasks?full=1')).body.tasks;
      expect(fitted.map((t: any) => t.id)).toEqual(['prior-int8']);
      const r = await server.post('/v1/tasks/import', { tasks: fitted });
      expect(r.body.loaded).toEqual([]);
      expect(r.body.refused.map((x: any) => x.reason)).toEqual([expect.stringMatching(/differing: quantization/)]);
      // decide honours --quantization: the int8 server's answer, bit for bit (and not the unquantized one).
      const request = { state: keywordState('delta', 8081), questions: { n: { type: 'noul', instructions: 'Is it late?' } } };  // no task's question
      const req = path.join(dir, 'int8-request.json');
      fs.writeFileSync(req, JSON.stringify(request));
      const decided = JSON.parse((await runDecide([req, '--base', 'tiny-qwen3', '--dtype', 'fp32', '--quantization', 'int8'])).stdout);
      const [servedInt8, served] = [(await int8.post('/v1/systemone', request)).body, (await server.post('/v1/systemone', request)).body];
      expect(decided.answers).toEqual(servedInt8.answers);
      expect(decided.answers).not.toEqual(served.answers);
    } finally {
      await int8.stop();
    }
  });
});

test('/v1/systemone keeps answering while a task registers (fitting runs in a worker)', async () => {
  const registration = server.post('/v1/tasks', { id: 'keyword-big', examples: keywordExamples(120, 2000, codeWords.map((w) => w.toUpperCase())) });
  let done = false;
  const t0 = Date.now();
  registration.then(() => (done = true));
  const latencies: number[] = [];
  while (!done) {
    const t = Date.now();
    const r = await server.post('/v1/systemone', { state: `Probe ${latencies.length}: the weather is fine.`, questions: { n: { type: 'noul' } } });
    expect(r.status).toBe(200);
    latencies.push(Date.now() - t);
    await new Promise((res) => setTimeout(res, 50));
  }
  const took = Date.now() - t0;
  const r = await registration;
  expect(r.status).toBe(200);
  expect(r.body.applied).toBe('head');
  console.log(`registration of 120 examples (12 options) took ${took} ms; ${latencies.length} main-route requests answered meanwhile, max ${Math.max(...latencies)} ms, median ${latencies.sort((a, b) => a - b)[latencies.length >> 1]} ms`);
  expect(latencies.length).toBeGreaterThan(5);
  expect(Math.max(...latencies)).toBeLessThan(took / 3);
  await server.delete('/v1/tasks/keyword-big');
});
