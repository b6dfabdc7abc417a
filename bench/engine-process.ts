/**
 * The engine in the server's engine process against the same engine in tq_cli (not a test): `npm run bench:engine-process`.
 * The same cold calls, a new ~1,000-token state and one question each (bench-llama, bf16, 2 threads; BENCH_MODEL
 * to change): through a server, its engine's own time (the `warm` and `questions` stages) and the engine process's page
 * faults per call (/proc/<pid>/stat); then the same token ids through tq_cli, whose engine runs on the process's main
 * thread. The server runs in arms that differ only in its engine process's GLIBC_TUNABLES: as the server sets them
 * (server/engine-process/client.ts), and with glibc's own arena limit (8 a core: the engine thread gets a malloc
 * arena of its own). Then, on each server, a warm question: the first state again with a new question, the engine's
 * time for it. ENGINE_ROUNDS rounds (default 3), the arms and tq_cli taking turns; ENGINE_CALLS calls of each kind
 * (default 6, the first of each run left out). Prints each round's medians, then the medians of the rounds.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { generateTestModel } from '../src/testmodels/generate';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { dossier, median, serviceStages, topicQuestion } from './workload';

const root = path.resolve(__dirname, '..');
const MODEL = process.env.BENCH_MODEL ?? 'bench-llama';
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const ROUNDS = Number(process.env.ENGINE_ROUNDS ?? 3);
const CALLS = Number(process.env.ENGINE_CALLS ?? 6);
const ARMS: Record<string, string | undefined> = {
  "the server's engine process": undefined,
  [`the same, glibc.malloc.arena_max=${8 * os.cpus().length}`]: `glibc.malloc.hugetlb=1:glibc.malloc.arena_max=${8 * os.cpus().length}`,
};

type Row = { state: number; questions: number; faults?: number; warm?: number; warmFaults?: number };
type Prompt = { state: number[]; question: number[]; labels: number[] };
const COLUMNS = ['state', 'questions', 'faults', 'warm', 'warmFaults'] as const;
const TABLE_HEAD = '| engine | state ms | questions ms | page faults a call | warm question, engine ms | its page faults |\n|---|---|---|---|---|---|';
/** The process's minor page faults so far (/proc/<pid>/stat's tenth field). */
const minorFaults = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[7]);

/** Calls `first`..`first + CALLS - 1` through a server whose engine process runs with `tunables`; also each call's prompt tokens. */
async function throughServer(dir: string, first: number, tunables?: string) {
  const { child, output, exited } = runServerProcess(['--base', dir, '--dtype', 'bf16', '--threads', String(THREADS), '--port', '0', '--debug-readout'],
    tunables ? { GLIBC_TUNABLES: tunables } : {});
  try {
    const url = await listeningUrl(output, exited);
    const enginePid: number = ((await (await fetch(`${url}/health`)).json()) as any).base.engine_process.pid;
    const rows: Row[] = [];
    const prompts: Prompt[] = [];
    for (let i = 0; i < CALLS; i++) {
      const before = minorFaults(enginePid);
      const res = await fetch(`${url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-debug': 'readout' },
        body: JSON.stringify({ state: dossier(first + i), questions: { q: topicQuestion(1) } }) });
      const q = ((await res.json()) as any).readout.q;
      const s = serviceStages(res.headers.get('x-service-stages')!);
      rows.push({ state: s.warm, questions: s.questions, faults: minorFaults(enginePid) - before });
      prompts.push({ state: q.prompt_token_ids.slice(0, q.state_token_count), question: q.prompt_token_ids.slice(q.state_token_count), labels: q.label_token_ids });
    }
    // Warm: the first state again, a new question each time (the state from the prefix cache, the question computed).
    const warm: number[] = [], warmFaults: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const before = minorFaults(enginePid);
      const res = await fetch(`${url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ state: dossier(first), questions: { q: topicQuestion(100 + i) } }) });
      await res.json();
      warm.push(serviceStages(res.headers.get('x-service-stages')!).engine);
      warmFaults.push(minorFaults(enginePid) - before);
    }
    return { rows: rows.slice(1).map((r, i) => ({ ...r, warm: warm[i + 1], warmFaults: warmFaults[i + 1] })), prompts };
  } finally {
    child.kill();
    await exited;
  }
}

/** The same prompts through tq_cli, one call each, in one process. */
function throughCli(dir: string, prompts: Prompt[]): Row[] {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tq-engine-process-')), 'calls.json');
  fs.writeFileSync(file, JSON.stringify({ calls: prompts.map((p) => [{ state: p.state, questions: [{ tokens: p.question, labelIds: p.labels }], wantHidden: false }]) }));
  const out = JSON.parse(execFileSync(path.join(root, 'build', 'tq_cli'), ['answer', '--model', dir, '--calls', file, '--dtype', 'bf16', '--threads', String(THREADS)],
    { encoding: 'utf8', maxBuffer: 1 << 28 }));
  return out.calls.slice(1).map((c: { stateMs: number; questionsMs: number }[]) => ({ state: c[0].stateMs, questions: c[0].questionsMs }));
}

/** Each column's median over `rows` (a column the rows lack stays undefined). */
const summary = (rows: Row[]): Row =>
  Object.fromEntries(COLUMNS.map((c) => [c, rows[0][c] === undefined ? undefined : median(rows.map((r) => r[c]!))])) as Row;
const line = (name: string, r: Row) =>
  `| ${name} | ${COLUMNS.map((c) => (r[c] === undefined ? '-' : r[c]!.toFixed(c === 'state' || c.endsWith('aults') ? 0 : 1))).join(' | ')} |`;

async function main() {
  const dir = generateTestModel(MODEL);
  const cpu = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
  console.log(`# The engine in the server's engine process against tq_cli: ${MODEL}, bf16, ${THREADS} threads, ${cpu}`);
  console.log(`cold calls (a new state and one question each), ${CALLS - 1} a run after the first; ms, medians\n`);
  const rounds: Record<string, Row[]> = {};
  let first = 1;
  for (let round = 1; round <= ROUNDS; round++) {
    console.log(`round ${round}\n\n${TABLE_HEAD}`);
    let prompts: Prompt[] = [];
    for (const [name, tunables] of Object.entries(ARMS)) {
      const r = await throughServer(dir, first, tunables);
      first += CALLS;
      prompts = r.prompts;
      (rounds[name] ??= []).push(summary(r.rows));
      console.log(line(name, summary(r.rows)));
    }
    const cli = summary(throughCli(dir, prompts));
    (rounds['tq_cli (the main thread)'] ??= []).push(cli);
    console.log(line('tq_cli (the main thread)', cli) + '\n');
  }
  console.log(`the medians of the ${ROUNDS} rounds\n\n${TABLE_HEAD}`);
  for (const [name, rows] of Object.entries(rounds)) console.log(line(name, summary(rows)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
