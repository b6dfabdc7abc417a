/**
 * Serving benchmark (not a test): `npm run bench:serving`. The real tqserve
 * server (bf16, bench-llama, 2 threads) against llama.cpp on the same weights
 * (GGUF) and the same prompt tokens (taken from tqserve's debug readout), in
 * one run: a cold question on a 1,000-token state, 16 questions on one state,
 * the state asked again (warm), 8 concurrent clients for 30 s, peak memory,
 * and the agreement of both engines' label probabilities. BENCH_QUANTIZATION=int8: tqserve with int8
 * weights against llama.cpp on a Q8_0 GGUF of the same weights (docs/quantization.md). BENCH_MODEL=bench-mixtral:
 * the mixture of experts (bench/moe.ts) in place of bench-llama.
 */
import { execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as readline from 'readline';
import { writeLlamaGguf } from './peer/gguf';
import { softmax } from '../src/answering/answers';
import { generateTestModel } from '../src/testmodels/generate';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { dossier, median, quantile, topicQuestion } from './workload';

const root = path.resolve(__dirname, '..');
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const CLIENTS = 8;
const COLD_PAIRS = Number(process.env.BENCH_COLD_PAIRS ?? 5);
// Runs of the 16 questions in each engine (a new state each time): the first carries each engine's
// first-time allocations for a step of that size, so the median of 5 is steadier than that of 2.
const SIXTEEN_RUNS = Number(process.env.BENCH_SIXTEEN_RUNS ?? 5);
const QUANTIZATION = process.env.BENCH_QUANTIZATION ?? 'none';
const MODEL = process.env.BENCH_MODEL ?? 'bench-llama';
if (!['bench-llama', 'bench-mixtral'].includes(MODEL)) throw new Error(`BENCH_MODEL must be bench-llama or bench-mixtral, got ${MODEL}`);
if (!['none', 'int8'].includes(QUANTIZATION)) throw new Error(`BENCH_QUANTIZATION must be none or int8, got ${QUANTIZATION}`);
const int8 = QUANTIZATION === 'int8';

const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));
const peakMiB = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

const questionSet = Array.from({ length: 16 }, (_, i) =>
  i % 2 === 0
    ? { type: 'noul', instructions: `Does the text mention item ${i}: ${['costs', 'delays', 'carriers', 'meetings'][i % 4]}?` }
    : topicQuestion(i),
);
const oneQuestion = (variant: number) => ({ state: dossier(variant), questions: { q: questionSet[1] } });

/** The server on the bench model (bf16, int8 weights with BENCH_QUANTIZATION); its log lines go to stdout, which listeningUrl reads. */
async function startServer(): Promise<{ url: string; pid: number; stop: () => void }> {
  const dir = generateTestModel(MODEL);
  const { child, output, exited } = runServerProcess(['--base', dir, '--dtype', 'bf16', '--threads', String(THREADS), '--port', '0', '--debug-readout', '--quantization', QUANTIZATION]);
  const url = await listeningUrl(output, exited);
  return { url, pid: child.pid!, stop: () => child.kill() };
}

function writeInput(input: object): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tq-bench-')), 'input.json');
  fs.writeFileSync(file, JSON.stringify(input));
  return file;
}

/** llama.cpp in its own process, running one cold question each time it is asked. */
async function startColdPeer(input: object) {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', 'bench/peer/llamacpp-serving.ts', writeInput(input), '--cold-on-request'], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<any> => {
    for (;;) {
      const { value, done } = await lines.next();
      if (done) throw new Error('the llama.cpp peer exited');
      if (value.startsWith('{')) return JSON.parse(value);
    }
  };
  await next(); // loaded
  return {
    run: async (): Promise<{ ms: number; labels: number[] }> => {
      child.stdin!.write('go\n');
      return next();
    },
    stop: () => child.stdin!.end(),
  };
}

async function main() {
  const dir = generateTestModel(MODEL);
  const gguf = writeLlamaGguf(dir, { q8_0: int8 });
  const server = await startServer();
  const post = async (body: unknown, debug = false) => {
    const t0 = performance.now();
    const res = await fetch(server.url + '/v1/systemone', { method: 'POST', headers: { 'content-type': 'application/json', ...(debug ? { 'x-service-debug': 'readout' } : {}) }, body: JSON.stringify(body) });
    const json: any = await res.json();
    if (res.status !== 200) throw new Error(JSON.stringify(json));
    return { ms: performance.now() - t0, json, serverMs: Number(res.headers.get('x-service-server-ms')) };
  };
  const enginePid = ((await (await fetch(server.url + '/health')).json()) as any).base.engine_process.pid;

  // Warm up the server (first-call allocations), on a state not used below.
  await post(oneQuestion(999));
  // The cold question's tokens for the peer (its state is the warm state below).
  const readout = (await post(oneQuestion(0), true)).json.readout.q;
  const stateTokens: number[] = readout.prompt_token_ids.slice(0, readout.state_token_count);
  // Cold, alternating with llama.cpp so that both meet the machine in the same state (it is shared,
  // and its speed drifts over minutes): tqserve gets a new state each time (a prefix-cache miss),
  // llama.cpp an emptied sequence. One untimed run of the peer first, as the server had.
  const coldPeer = await startColdPeer({ gguf, threads: THREADS, state: stateTokens, coldQuestion: readout.prompt_token_ids.slice(readout.state_token_count), coldLabels: readout.label_token_ids });
  await coldPeer.run();
  const cold: number[] = [], peerCold: number[] = [];
  let peerColdLabels: number[] = [];
  for (let v = 1; v <= COLD_PAIRS; v++) {
    cold.push((await post(oneQuestion(v))).ms);
    const r = await coldPeer.run();
    peerCold.push(r.ms);
    peerColdLabels = r.labels;
  }
  coldPeer.stop();
  // Sixteen questions on one new state, in one request.
  const sixteen = [];
  for (let v = 10; v < 10 + SIXTEEN_RUNS; v++) sixteen.push(await post({ state: dossier(v), questions: Object.fromEntries(questionSet.map((q, i) => [`q${i}`, q])) }, true));
  const sixteenReadout = Object.values<any>(sixteen[0].json.readout);
  // Warm: the state of the first cold request again (its boundary was registered after that response).
  const warm = [];
  for (let i = 0; i < 5; i++) warm.push(await post(oneQuestion(0)));
  // Concurrent clients, each with its own state, one question per request.
  const clientReadouts = [];
  for (let c = 0; c < CLIENTS; c++) clientReadouts.push((await post(oneQuestion(100 + c), true)).json.readout.q);
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      while (performance.now() - t0 < SECONDS * 1000) latencies.push((await post(oneQuestion(100 + c))).ms);
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  const memory = { server: peakMiB(server.pid), engine: peakMiB(enginePid) };
  server.stop();

  // The peer, on the same tokens.
  const input = {
    gguf,
    threads: THREADS,
    state: stateTokens,
    coldQuestion: readout.prompt_token_ids.slice(readout.state_token_count),
    coldLabels: readout.label_token_ids,
    sixteenRuns: SIXTEEN_RUNS,
    sixteenState: sixteenReadout[0].prompt_token_ids.slice(0, sixteenReadout[0].state_token_count),
    questions: sixteenReadout.map((r) => r.prompt_token_ids.slice(r.state_token_count)),
    labels: sixteenReadout.map((r) => r.label_token_ids),
    clientStates: clientReadouts.map((r) => r.prompt_token_ids.slice(0, r.state_token_count)),
    concurrentSeconds: SECONDS,
  };
  const peer = JSON.parse(execFileSync(process.execPath, ['-r', 'ts-node/register/transpile-only', 'bench/peer/llamacpp-serving.ts', writeInput(input)], { cwd: root, encoding: 'utf8' }).trim().split('\n').pop()!);

  const agreeCold = maxDiff(softmax(readout.label_logits, 1), softmax(peerColdLabels, 1));
  const agreeSixteen = Math.max(...sixteenReadout.map((r, i) => maxDiff(softmax(r.label_logits, 1), softmax(peer.sixteenLabels[i], 1))));
  const rows = [
    [`one question, 1,000-token state, cold (ms; ${COLD_PAIRS} runs alternating with llama.cpp)`, median(cold), median(peerCold)],
    [`16 questions on one state (ms; median of ${SIXTEEN_RUNS})`, median(sixteen.map((r) => r.ms)), peer.sixteenMs],
    ['the same state again, one question, warm (ms)', median(warm.map((r) => r.ms)), peer.warmMs],
  ];
  console.log(`# tqserve serving benchmark: ${MODEL}, ${int8 ? 'int8 weights (tqserve) and Q8_0 (llama.cpp)' : 'bf16'}, ${THREADS} threads`);
  console.log(`state ${stateTokens.length} tokens (16-question state ${input.sixteenState.length}); question ${input.coldQuestion.length} tokens; tqserve times are client-side over HTTP\n`);
  console.log('| scenario | tqserve | llama.cpp | llama.cpp / tqserve |');
  console.log('|---|---|---|---|');
  for (const [name, ours, theirs] of rows) console.log(`| ${name} | ${(ours as number).toFixed(1)} | ${(theirs as number).toFixed(1)} | ${((theirs as number) / (ours as number)).toFixed(2)}x |`);
  const ourRate = latencies.length / elapsed;
  console.log(`| ${CLIENTS} clients x ${SECONDS} s: requests/s | ${ourRate.toFixed(2)} | ${peer.concurrent.perSecond.toFixed(2)} | ${(ourRate / peer.concurrent.perSecond).toFixed(2)}x (higher is better) |`);
  console.log(`| ${CLIENTS} clients: p50 / p99 latency (ms) | ${quantile(latencies, 0.5).toFixed(0)} / ${quantile(latencies, 0.99).toFixed(0)} | ${peer.concurrent.p50.toFixed(0)} / ${peer.concurrent.p99.toFixed(0)} | ${(peer.concurrent.p50 / quantile(latencies, 0.5)).toFixed(2)}x / ${(peer.concurrent.p99 / quantile(latencies, 0.99)).toFixed(2)}x |`);
  console.log(`| peak memory (MiB) | ${(memory.server + memory.engine).toFixed(0)} (server ${memory.server.toFixed(0)} + engine ${memory.engine.toFixed(0)}) | ${peer.peakMiB.toFixed(0)} | |`);
  console.log(`\nlabel probabilities, max |Δp| tqserve vs llama.cpp: cold ${agreeCold.toExponential(1)}; 16 questions ${agreeSixteen.toExponential(1)}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
