/**
 * The CPU kernels' level chosen by measurement (csrc/kernels/cpu/level_choice.h), through servers (the environment
 * is the process's): at load the engine times the model's GEMMs at every level this CPU runs and takes the fastest,
 * and keeps the choice in a file (TQ_LEVEL_CACHE here), so that every engine of the model on this machine takes the
 * same level; /health and the start-up line say the level, the rates and how it was chosen. A level made slow on
 * purpose (TQ_LEVEL_HANDICAP, a test instrument: it times that level as ten times slower) is not chosen, on any CPU
 * with two levels or more, and the level taken instead answers with the bits of that level forced (TQ_KERNELS).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { runnableIsaLevels } from '../helpers/cpu';
import { startServer, RunningServer } from '../helpers/server';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-levels-'));
const env = { TQ_LEVEL_CACHE: path.join(scratch, 'levels') };
const servers: RunningServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  fs.rmSync(scratch, { recursive: true, force: true });
});

async function server(extra: Record<string, string> = {}) {
  const s = await startServer(['--dtype', 'bf16'], { ...env, ...extra });
  servers.push(s);
  const health = (await s.get('/health')).body;
  return { s, kernels: health.kernels as string, choice: health.kernel_choice as { how: string; gflops: Record<string, number> } };
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
  const rates = Object.entries(first.choice.gflops).sort((a, b) => b[1] - a[1]);
  expect(first.kernels).toBe(rates[0][0]);
  expect(rates.map(([level]) => level).sort()).toEqual(runnableIsaLevels().sort());
  expect(first.s.log()).toContain(`kernels ${first.kernels} (measured: `);
  expect(fs.readFileSync(env.TQ_LEVEL_CACHE, 'utf8')).toContain(`\t${first.kernels}\t`);
  const next = await server();
  expect([next.kernels, next.choice.how]).toEqual([first.kernels, 'cached']);
});

(multi ? test : test.skip)('a level made slow on purpose is not chosen; the level taken answers with its own bits', async () => {
  const plain = await server();
  const [slowed, forced] = await Promise.all([server({ TQ_LEVEL_HANDICAP: plain.kernels }), server({ TQ_KERNELS: 'portable' })]);
  expect(slowed.choice.how).toBe('measured');
  expect(slowed.kernels).not.toBe(plain.kernels);
  expect(slowed.choice.gflops[plain.kernels]).toBeLessThan(slowed.choice.gflops[slowed.kernels]);
  expect(forced.choice.how).toBe('forced');
  // On a CPU with two levels the other is portable; with more, the one taken is checked against itself forced.
  const against = slowed.kernels === 'portable' ? forced : await server({ TQ_KERNELS: slowed.kernels });
  expect(against.kernels).toBe(slowed.kernels);
  expect(await logits(slowed.s)).toEqual(await logits(against.s));
});
