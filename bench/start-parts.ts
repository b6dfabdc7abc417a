/**
 * The CPU of a start's parts, each in a fresh Node process (what a server and its engine process pay at every
 * start), not a test: `npm run bench:start-parts`. STARTUP_BASE (default tiny-qwen3), RUNS (default 6) runs of each,
 * the forms of a part alternating:
 *   - the tokenizer: tokenizer.json loaded by the library alone (`Tokenizer.fromFile`) and by `ModelTokenizer.load`
 *     (src/tokenizer/tokenizer.ts), its CPU and the process's resident size after;
 *   - an engine's open (bf16, 2 threads): at a level forced, and with its level measured (a cache file of its own:
 *     nothing kept from before), with the rounds the measurement took;
 *   - twelve opens in one process, the threads 1, 2, 3 in turn (a level forced): what each open costs a process that
 *     opens several, as the tests' do;
 *   - the server's own steps: what src/server/main.ts loads before it forks the engines, the request validators'
 *     module, the tasks' fingerprint (hashing the checkpoint's tokenizer files), and the renderer's label sets.
 * PARTS_DIST (default dist/) is the compiled server the parts load: another checkout's dist/ measures the build before.
 * Each process gets GLIBC_TUNABLES as `npm start` gives the server (glibc.malloc.hugetlb=1 unless set): the tokenizer's
 * load differs most with it (docs/running.md, "Start-up"). Prints each run and the medians. Needs `npm run build` and
 * the addon built.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..');
const RUNS = Number(process.env.RUNS ?? 6);
const model = path.join(root, 'models', process.env.STARTUP_BASE ?? 'tiny-qwen3');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-start-parts-'));
const tunables = process.env.GLIBC_TUNABLES ?? 'glibc.malloc.hugetlb=1';
const dist = path.resolve(process.env.PARTS_DIST ?? path.join(root, 'dist'));
const fromDist = (module: string) => `require(${JSON.stringify(path.join(dist, module))})`;

/** Runs `body` (an async function's body; `done(fields)` ends it) in a fresh Node process: its printed fields. */
function inProcess(body: string, env: NodeJS.ProcessEnv = {}): Record<string, number | string> {
  const script = `const cpu = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1e3; };
    const done = (fields) => { process.stdout.write(JSON.stringify({ ...fields, rssMiB: process.memoryUsage().rss / 2 ** 20 })); process.exit(0); };
    (async () => { ${body} })();`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8', env: { ...process.env, GLIBC_TUNABLES: tunables, ...env } }));
}

const forms: Record<string, () => Record<string, number | string>> = {
  'tokenizer: the library alone': () =>
    inProcess(`const { Tokenizer } = require('tokenizers'); const t0 = cpu();
      Tokenizer.fromFile(${JSON.stringify(path.join(model, 'tokenizer.json'))}); done({ cpuMs: cpu() - t0 });`),
  'tokenizer: ModelTokenizer.load': () =>
    inProcess(`const { ModelTokenizer } = ${fromDist('tokenizer/tokenizer')}; const t0 = cpu();
      await ModelTokenizer.load(${JSON.stringify(model)}); done({ cpuMs: cpu() - t0 });`),
  'engine open, level forced': () => engineOpen({ TQ_KERNELS: 'avx512' }),
  'engine open, level measured': () => engineOpen({ TQ_LEVEL_CACHE: path.join(fs.mkdtempSync(path.join(scratch, 'levels-')), 'levels') }),
  'twelve opens in a process, each': () =>
    inProcess(`const { Engine } = ${fromDist('engine/engine')}; const t0 = cpu();
      for (let i = 0; i < 12; i++) await (await Engine.open({ path: ${JSON.stringify(model)}, dtype: 'bf16', threads: 1 + (i % 3) })).close();
      done({ cpuMs: (cpu() - t0) / 12 });`, { TQ_KERNELS: 'avx512' }),
  "server: main's imports before the fork": () => inProcess(`const t0 = cpu(); ${fromDist('server/main')}; done({ cpuMs: cpu() - t0 });`),
  'server: the request validators': () => inProcess(`const t0 = cpu(); ${fromDist('wire/validation')}; done({ cpuMs: cpu() - t0 });`),
  "server: the tasks' fingerprint": () =>
    inProcess(`const { computeFingerprint } = ${fromDist('tasks/fingerprint')}; const { defaultProfile } = ${fromDist('rendering/profile')};
      const t0 = cpu(); computeFingerprint({ checkpoint: ${JSON.stringify(model)}, profile: defaultProfile, temperatures: { noul: 1, choice: 1, score: 1 }, headEngine: null });
      done({ cpuMs: cpu() - t0 });`),
  "server: the renderer's label sets": () =>
    inProcess(`const { ModelTokenizer } = ${fromDist('tokenizer/tokenizer')}; const { Renderer } = ${fromDist('rendering/renderer')};
      const tokenizer = await ModelTokenizer.load(${JSON.stringify(model)}); const t0 = cpu();
      await Renderer.create(tokenizer, ${fromDist('rendering/profile')}.defaultProfile); done({ cpuMs: cpu() - t0 });`),
};

function engineOpen(env: NodeJS.ProcessEnv) {
  return inProcess(`const { Engine } = ${fromDist('engine/engine')}; const t0 = cpu();
    const e = await Engine.open({ path: ${JSON.stringify(model)}, dtype: 'bf16', threads: 2 });
    const c = e.info.levelChoice; done({ cpuMs: cpu() - t0, level: e.info.kernels + (c && c.rounds ? ', ' + c.rounds + ' rounds' + (c.busy ? ', busy' : '') : '') });`, env);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function main() {
  const runs: Record<string, Record<string, number | string>[]> = Object.fromEntries(Object.keys(forms).map((f) => [f, []]));
  for (let r = 0; r < RUNS; r++) for (const [form, run] of Object.entries(forms)) runs[form].push(run());
  console.log(`CPU of a start's parts (${os.cpus()[0].model}, ${os.cpus().length} cores), ${path.basename(model)}, ${dist}, GLIBC_TUNABLES=${tunables}, ${RUNS} runs each, alternating:`);
  for (const [form, rs] of Object.entries(runs)) {
    const cpu = rs.map((r) => Number(r.cpuMs)), rss = rs.map((r) => Number(r.rssMiB));
    const levels = [...new Set(rs.map((r) => r.level).filter(Boolean))].join('; ');
    console.log(`  ${form.padEnd(34)} median ${median(cpu).toFixed(0).padStart(5)} ms CPU, ${median(rss).toFixed(0)} MiB resident` +
      `   runs ${cpu.map((c) => c.toFixed(0)).join(' ')}${levels ? `   (${levels})` : ''}`);
  }
  fs.rmSync(scratch, { recursive: true, force: true });
}

main();
