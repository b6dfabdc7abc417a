/**
 * The CPU kernels' level chosen by measurement (csrc/kernels/cpu/level_choice.h), a matter of speed alone: every
 * level gives the same bits (docs/arithmetic.md). Through servers (the environment is the process's): at load the
 * engine times the model's GEMMs at every level this CPU runs, the levels taking turns over rounds (three where one
 * level leads decisively, else seven), and takes the fastest; a trusted measurement is kept in a file
 * (TQ_LEVEL_CACHE here) that the next engine reads; /health and the start-up line say the level, the rates and how
 * it was chosen (/health the rounds too). A measurement taken while other processes load the CPUs is marked busy and not kept
 * in the file: kept beside it for a minute, the next engines of the same key, in any process, take it rather than measure.
 * A level made slow on purpose (TQ_LEVEL_HANDICAP, a test instrument: it times those levels as a hundred times slower) is
 * not chosen, on any CPU with two levels or more, and the level taken answers with the same bits as any other. An
 * engine that started on a slow level (the others made slow at its start) moves to a fast one when measured again,
 * with the same bits; and the server's engine measures again by itself once it is idle after start.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { execFile, spawn } from 'child_process';
import { runnableIsaLevels } from '../helpers/cpu';
import { tinyModel } from '../helpers/models';
import { startServer, RunningServer } from '../helpers/server';
import { tokenizeTexts } from '../helpers/tokens';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-levels-'));
const env = { TQ_LEVEL_CACHE: path.join(scratch, 'levels') };
const servers: RunningServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  fs.rmSync(scratch, { recursive: true, force: true });
});

type Choice = { how: string; busy: boolean; rounds: number; gflops: Record<string, number>; answers_depend_on_level: boolean };
async function report(s: RunningServer) {
  const health = (await s.get('/health')).body;
  return { s, kernels: health.kernels as string, choice: health.kernel_choice as Choice };
}
async function server(extra: Record<string, string> = {}) {
  const s = await startServer(['--dtype', 'bf16'], { ...env, ...extra });
  servers.push(s);
  return report(s);
}

const body = {
  state: 'The invoice of March was paid twice; the customer asked for a refund of the second payment. '.repeat(4),
  questions: [{ kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] }],
};
const logits = async (s: RunningServer) => (await s.post('/v1/answer', body)).body.answers[0].logits as number[];

const multi = runnableIsaLevels().length > 1;
(multi ? test : test.skip)('the fastest level is measured, said, kept in the file and taken from it by the next server', async () => {
  const first = await server();
  expect(first.choice.how).toBe('measured');
  expect(first.choice.rounds).toBeGreaterThanOrEqual(3);
  expect(first.choice.rounds).toBeLessThanOrEqual(7);
  expect(first.choice.answers_depend_on_level).toBe(false);
  const rates = Object.entries(first.choice.gflops).sort((a, b) => b[1] - a[1]);
  expect(first.kernels).toBe(rates[0][0]);
  expect(rates.map(([level]) => level).sort()).toEqual(runnableIsaLevels().sort());
  expect(first.s.log()).toContain(`kernels ${first.kernels} (measured${first.choice.busy ? ' while the machine was busy' : ''}`);
  // Kept only when the machine was not busy as it was measured; the next server then reads it.
  const kept = fs.existsSync(env.TQ_LEVEL_CACHE) && fs.readFileSync(env.TQ_LEVEL_CACHE, 'utf8').includes(`\t${first.kernels}\t`);
  expect(kept).toBe(!first.choice.busy);
  const next = await server();
  if (kept) expect([next.kernels, next.choice.how, next.choice.rounds]).toEqual([first.kernels, 'cached', 0]);
  // A busy one is kept beside the file for a minute: the next server takes it, saying busy (the last test's subject).
  else expect([next.kernels, next.choice.how, next.choice.busy]).toEqual([first.kernels, 'cached', true]);
});

(multi ? test : test.skip)('a level made slow on purpose is not chosen; the level taken answers with its own bits', async () => {
  const plain = await server();
  const [slowed, forced] = await Promise.all([server({ TQ_LEVEL_HANDICAP: plain.kernels }), server({ TQ_KERNELS: 'generic' })]);
  expect(slowed.choice.how).toBe('measured');
  expect(slowed.kernels).not.toBe(plain.kernels);
  expect(slowed.choice.gflops[plain.kernels]).toBeLessThan(slowed.choice.gflops[slowed.kernels]);
  expect(forced.choice.how).toBe('forced');
  // On a CPU with two levels the other is generic; with more, the one taken is checked against itself forced.
  const against = slowed.kernels === 'generic' ? forced : await server({ TQ_KERNELS: slowed.kernels });
  expect(against.kernels).toBe(slowed.kernels);
  expect(await logits(slowed.s)).toEqual(await logits(against.s));
});

/** In a process of its own (the environment is the process's), two engines of tiny-qwen3 opened one after the other: how each chose its level. */
function twoOpens(env: NodeJS.ProcessEnv): Promise<{ how: string; busy: boolean; rounds: number }[]> {
  const script = `
    const { Engine } = require(${JSON.stringify(path.resolve(__dirname, '../../dist/index.js'))});
    (async () => {
      const choices = [];
      for (let i = 0; i < 2; i++) {
        const engine = await Engine.open({ path: ${JSON.stringify(tinyModel('tiny-qwen3'))}, dtype: 'bf16', threads: 2 });
        const { how, busy, rounds } = engine.info.levelChoice;
        choices.push({ how, busy, rounds });
        await engine.close();
      }
      console.log(JSON.stringify(choices));
    })();`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ['-e', script], { env: { ...process.env, ...env } }, (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(JSON.parse(stdout)))));
}

(multi ? test : test.skip)('a level measured while other processes load every CPU is marked busy and not kept in the file; the server answers all the same; the next engines take it for a minute, in the process and in others', async () => {
  // Twice as many spinning processes as CPUs: whatever the CPU count, they take more than the engine's threads leave free.
  const hogs = Array.from({ length: 2 * os.cpus().length }, () => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
  try {
    const cache = path.join(scratch, 'busy-levels');
    const busy = await server({ TQ_LEVEL_CACHE: cache });
    expect([busy.choice.how, busy.choice.busy]).toEqual(['measured', true]);
    expect(busy.s.log()).toContain(`kernels ${busy.kernels} (measured while the machine was busy, to be measured again: `);
    expect(fs.existsSync(cache) ? fs.readFileSync(cache, 'utf8') : '').toBe('');
    expect((await busy.s.post('/v1/answer', body)).status).toBe(200);
    // In one process, a second engine of the same model and settings takes the first's busy measurement (for a minute)
    // instead of measuring on a machine just as busy.
    const inProcess = path.join(scratch, 'busy-in-process');
    const [first, second] = await twoOpens({ TQ_LEVEL_CACHE: inProcess });
    expect(first).toMatchObject({ how: 'measured', busy: true });
    expect(second).toEqual({ how: 'cached', busy: true, rounds: 0 });
    // Another process within the minute takes it too, from beside the file (<file>.busy), which keeps it apart from
    // the trusted measurements.
    expect(await twoOpens({ TQ_LEVEL_CACHE: inProcess })).toEqual([{ how: 'cached', busy: true, rounds: 0 }, { how: 'cached', busy: true, rounds: 0 }]);
    expect(fs.readFileSync(inProcess, 'utf8')).toBe('');
    expect(fs.readFileSync(`${inProcess}.busy`, 'utf8')).toMatch(/\t\d{10}\t[a-z0-9-]+\t/);
  } finally {
    for (const h of hogs) h.kill('SIGKILL');
  }
});

/**
 * In a process of its own (jest's process.env is a sandbox the addon does not see): the package's Engine opened with
 * `handicap` in the environment, which is then removed, and measured again; the levels and label-logit bits before
 * and after.
 */
function openThenRemeasure(handicap: string): Promise<{ before: [string, string]; rounds: number; after: [string, string, boolean]; same: boolean }> {
  const script = `
    const { Engine } = require(${JSON.stringify(path.resolve(__dirname, '../../dist/index.js'))});
    const bits = (r) => r.answers.map((a) => Buffer.from(a.labelLogits.buffer, a.labelLogits.byteOffset, a.labelLogits.byteLength).toString('hex'));
    (async () => {
      const request = JSON.parse(process.argv[1]);
      const engine = await Engine.open({ path: ${JSON.stringify(tinyModel('tiny-qwen3'))}, dtype: 'bf16', threads: 2 });
      delete process.env.TQ_LEVEL_HANDICAP;
      const before = [engine.info.kernels, engine.info.levelChoice.how], rounds = engine.info.levelChoice.rounds;
      const first = bits(await engine.answer(request));
      const info = await engine.remeasureLevel();
      const same = JSON.stringify(bits(await engine.answer(request))) === JSON.stringify(first);
      console.log(JSON.stringify({ before, rounds, after: [info.kernels, info.levelChoice.how, info.levelChoice.busy], same }));
      await engine.close();
    })();`;
  return tokenizeTexts(tinyModel('tiny-qwen3')).then((t) => {
    const request = { state: t.state, questions: t.questions.map((tokens) => ({ tokens, labelIds: t.labels })) };
    const childEnv = { ...process.env, TQ_LEVEL_CACHE: path.join(scratch, 'in-process'), TQ_LEVEL_HANDICAP: handicap };
    return new Promise((resolve, reject) =>
      execFile(process.execPath, ['-e', script, JSON.stringify(request)], { env: childEnv }, (error, stdout, stderr) =>
        error ? reject(new Error(stderr)) : resolve(JSON.parse(stdout))));
  });
}

(multi ? test : test.skip)('an engine that started on a slow level moves to a fast one when measured again, with the same bits', async () => {
  const fast = runnableIsaLevels().filter((level) => level !== 'generic');
  const { before, after, same } = await openThenRemeasure(fast.join(','));
  expect(before).toEqual(['generic', 'measured']);
  expect(after[1]).toBe('re-measured');
  // generic is the slowest level on every CPU by far (no wide vectors): measured quietly, it is left.
  if (!after[2]) expect(fast).toContain(after[0]);
  expect(same).toBe(true);
});

(multi ? test : test.skip)('a level that leads decisively ends the measurement after three rounds of the seven', async () => {
  // The highest level against the others made a hundred times slower: far ahead on every CPU, busy or not.
  const [top, ...others] = runnableIsaLevels();
  const { before, rounds } = await openThenRemeasure(others.join(','));
  expect(before).toEqual([top, 'measured']);
  expect(rounds).toBe(3);
});

(multi ? test : test.skip)("the server's engine measures its level again once idle after start, and /health says so", async () => {
  const { s } = await server({ TQ_REMEASURE_LEVEL_AFTER_MS: '200' });
  let now = await report(s);
  while (now.choice.how !== 're-measured') {
    await new Promise((resolve) => setTimeout(resolve, 100));
    now = await report(s);
  }
  const rates = Object.entries(now.choice.gflops).sort((a, b) => b[1] - a[1]);
  if (!now.choice.busy) expect(now.kernels).toBe(rates[0][0]);
  expect((await s.post('/v1/answer', body)).status).toBe(200);
});
