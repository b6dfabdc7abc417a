/**
 * Each kernel level's speed, this build against another (not a test): `npm run bench:levels`, with
 * BASE_CLI the tq_cli of the build to compare with (e.g. one built from the commit before a change to
 * the arithmetic: docs/arithmetic.md, "How each level pays for it"). On bench-llama, a prefill of
 * BENCH_STATE_TOKENS (default 250) tokens to one question's label logits, no prefix cache, at every
 * level this CPU runs, in fp32, bf16 and bf16 with int8 weights, each forced with --isa. The two
 * builds and the levels take turns within each of BENCH_ROUNDS rounds (default 3), so that a busy
 * moment hits both builds alike; each figure is the median of the rounds' best-of-2 wall times.
 * Without BASE_CLI, this build's figures alone.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { generateTestModel } from '../src/testmodels/generate';
import { runnableIsaLevels } from '../test/helpers/cpu';
import { cliPath } from '../test/helpers/tq-cli';
import { execFileSync } from 'child_process';
import { defaultSpinCount } from '../src/engine/native';

const TOKENS = Number(process.env.BENCH_STATE_TOKENS ?? 250);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const builds: [string, string][] = [['this', cliPath], ...(process.env.BASE_CLI ? [['base', process.env.BASE_CLI] as [string, string]] : [])];
const configs = [
  { name: 'fp32', args: ['--dtype', 'fp32'] },
  { name: 'bf16', args: ['--dtype', 'bf16'] },
  { name: 'bf16+int8', args: ['--dtype', 'bf16', '--quantization', 'int8'] },
];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cpuModel = () => fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';

function prefillMs(cli: string, model: string, calls: string, config: string[], isa: string): number {
  const out = execFileSync(cli, ['answer', '--model', model, '--calls', calls, ...config, '--isa', isa, '--threads', `${THREADS}`, '--prefix-cache', 'off', '--repeat', '2'],
    { encoding: 'utf8', env: { GOMP_SPINCOUNT: defaultSpinCount, ...process.env }, maxBuffer: 64 << 20 });
  const wall: number[][] = JSON.parse(out).wallMs;
  return Math.min(...wall.map((repeat) => repeat[0]));
}

function main() {
  const model = generateTestModel('bench-llama');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-levels-'));
  const calls = path.join(dir, 'calls.json');
  const state = Array.from({ length: TOKENS }, (_, i) => 1000 + ((i * 7919) % 20000));
  fs.writeFileSync(calls, JSON.stringify({ calls: [[{ state, questions: [{ tokens: [13, 22550, 29901], labelIds: [319, 350, 315, 360] }] }]] }));
  const levels = runnableIsaLevels();
  console.log(`CPU: ${cpuModel()}; ${THREADS} threads; bench-llama, ${TOKENS}-token prefill; builds: ${builds.map(([n, p]) => `${n} (${p})`).join(', ')}; ${ROUNDS} rounds\n`);
  const ms = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++)
    for (const config of configs)
      for (const level of levels)
        for (const [name, cli] of round % 2 ? [...builds].reverse() : builds) {
          const key = `${config.name}|${level}|${name}`;
          ms.set(key, [...(ms.get(key) ?? []), prefillMs(cli, model, calls, config.args, level)]);
        }
  console.log(`| config | level | ${builds.map(([n]) => `${n} ms`).join(' | ')}${builds.length > 1 ? ' | this / base |' : ''}`);
  console.log(`|---|---|${builds.map(() => '---|').join('')}${builds.length > 1 ? '---|' : ''}`);
  for (const config of configs)
    for (const level of levels) {
      const [mine, base] = builds.map(([n]) => median(ms.get(`${config.name}|${level}|${n}`)!));
      console.log(`| ${config.name} | ${level} | ${mine.toFixed(0)}${base ? ` | ${base.toFixed(0)} | ${(mine / base).toFixed(3)}` : ''} |`);
    }
  fs.rmSync(dir, { recursive: true, force: true });
}

main();
