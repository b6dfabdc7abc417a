/** --head-engine: intent heads read hidden states from a second engine process with its own model; its death is an engine death. */
import { codeWords, keywordExamples, keywordQuestion, keywordState } from '../helpers/tasks';
import { killAndAwaitDeadHealth, serverForFile, startServer } from '../helpers/server';

jest.setTimeout(300_000);

const server = serverForFile(['--head-engine', 'tiny-llama', '--exit-grace-ms', '3000']);

test('health and the task list name the head engine: a second process, its model, tap and hidden size', async () => {
  const health = (await server.get('/health')).body;
  expect(health.head_engine).toMatchObject({ engine: 'second engine process (--head-engine)', base: 'tiny-llama', architecture: 'LlamaForCausalLM', hidden_size: 64 });
  expect(health.head_engine.pid).not.toBe(health.base.engine_process.pid);
  expect((await server.get('/v1/tasks')).body.head_engine).toEqual(health.head_engine);
});

test('a keyword task fits its head on the head engine, is applied with it, and is refused by a server without that head engine', async () => {
  const r = await server.post('/v1/tasks', { id: 'keyword', examples: keywordExamples(120) });
  expect(r.status).toBe(200);
  expect(r.body.applied).toBe('head');
  expect(r.body.record.head.evidence.gain).toBeGreaterThan(0.5);
  // Fresh held-out states, one per word: the head (cross-validated accuracy in the record) names most of them.
  let right = 0;
  for (const [i, word] of codeWords.entries()) {
    const a = await server.post('/v1/systemone', { state: keywordState(word, 5000 + i), questions: { q: keywordQuestion() } });
    expect(a.headers.get('x-service-tasks')).toBe('keyword');
    expect(Object.keys(a.body.answers.q.probabilities)).toEqual(codeWords);
    right += a.body.answers.q.choice === word ? 1 : 0;
  }
  expect(r.body.record.metrics.head.accuracy).toBeGreaterThan(0.5);
  expect(right).toBeGreaterThanOrEqual(6);
  const full = (await server.get('/v1/tasks?full=1')).body;
  const plain = await startServer();
  try {
    const imported = await plain.post('/v1/tasks/import', { tasks: full.tasks });
    expect(imported.body.loaded).toEqual([]);
    expect(imported.body.refused[0].reason).toMatch(/differing: head_engine\)/);
  } finally {
    await plain.stop();
  }
});

test('when the head engine dies: 503 with the reason, then exit 70', async () => {
  const pid = (await server.get('/health')).body.head_engine.pid;
  const h = await killAndAwaitDeadHealth(server, pid);
  expect(h.body).toEqual({ ok: false, engine: 'dead', reason: expect.stringMatching(/^head engine \(--head-engine\): .*SIGKILL/), exit_code: 70 });
  expect((await server.post('/v1/systemone', { state: 'x', questions: { a: { type: 'noul' } } })).status).toBe(503);
  expect(await server.exited).toBe(70);
});
