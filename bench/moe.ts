/**
 * Mixture-of-experts benchmark (not a test): `npm run bench:moe`. On bench-mixtral (Mixtral's layout: 8 experts of
 * width 2,048, top 2, 16 layers of width 1,024; 0.91B parameters, 0.31B a token; random weights) it reports, in one run:
 *  - a 1,000-token prefill to label logits: tqserve bf16 (exact, the default) and int8 weights, against llama.cpp
 *    (node-llama-cpp's prebuilt CPU binary) on the same weights written as GGUF (BF16, and Q8_0 layers) and the same
 *    token ids, with the label probabilities of each against llama.cpp BF16's (equal computations);
 *  - the compute following the active parameters: the same weights with 1, 2, 4 and 8 experts a token
 *    (num_experts_per_tok edited), prefill time against the active and the total parameters;
 *  - memory: the weights as the kernels keep them against the checkpoint, and the engine process's resident memory.
 * BENCH_RUNS (3), BENCH_THREADS (2), BENCH_STATE_TOKENS (1000).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../src/engine/engine';
import { NativeLoadOptions } from '../src/engine/native';
import { generateTestModel } from '../src/testmodels/generate';
import { writeLlamaGguf } from './peer/gguf';
import { timePeerPrefill } from './peer/llamacpp';
import { paragraphTokens, timeEngineAnswers } from './workload';

const STATE_TOKENS = Number(process.env.BENCH_STATE_TOKENS ?? 1000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
// ▁A ... ▁H in Mistral's vocabulary (Mixtral's tokenizer).
const LABELS = [330, 365, 334, 384, 413, 401, 420, 382];

const fmt = (x: number, d = 1) => x.toFixed(d);
const cpuModel = () => fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const maxAbsDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));
const billions = (n: number) => `${(n / 1e9).toFixed(2)}B`;

/** The engine's 1,000-token prefill to the labels (999 state tokens, a 1-token question): median ms and probabilities. */
async function timeEngine(options: NativeLoadOptions, tokens: number[], runs = RUNS) {
  const engine = await Engine.open({ threads: THREADS, prefixCache: false, ...options });
  const request = { state: tokens.slice(0, -1), questions: [{ tokens: tokens.slice(-1), labelIds: LABELS }] };
  try {
    await engine.answer(request);
    const timed = await timeEngineAnswers(engine, request, runs);
    const rss = Number(fs.readFileSync('/proc/self/status', 'utf8').match(/^VmRSS:\s*(\d+)/m)![1]) * 1024;
    return { ...timed, info: engine.info, rss };
  } finally {
    await engine.close();
  }
}

/** The model with another number of experts a token: its config edited, its weights linked (not copied). */
async function withExpertsPerToken<T>(dir: string, k: number, f: (copy: string) => Promise<T>): Promise<T> {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-moe-'));
  try {
    for (const name of fs.readdirSync(dir)) if (name !== 'config.json' && !name.endsWith('.gguf')) fs.symlinkSync(path.join(dir, name), path.join(copy, name));
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(copy, 'config.json'), JSON.stringify({ ...config, num_experts_per_tok: k }));
    return await f(copy);
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
}

async function main() {
  const dir = generateTestModel('bench-mixtral');
  const tokens = await paragraphTokens(dir, STATE_TOKENS);
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  console.log('# tqserve mixture-of-experts benchmark');
  console.log(`model: bench-mixtral (MixtralForCausalLM, hidden ${config.hidden_size}, ${config.num_hidden_layers} layers, ` +
    `${config.num_local_experts} experts of width ${config.intermediate_size}, top ${config.num_experts_per_tok}; random weights stored BF16)`);
  console.log(`CPU: ${cpuModel()}; ${THREADS} threads; ${tokens.length} tokens to label logits; median of ${RUNS} runs after one warm-up\n`);

  const bf16 = await timeEngine({ path: dir, dtype: 'bf16' }, tokens);
  const int8 = await timeEngine({ path: dir, dtype: 'bf16', quantization: 'int8' }, tokens);
  const peers = {
    BF16: await timePeerPrefill(writeLlamaGguf(dir), tokens, LABELS, { threads: THREADS, runs: RUNS }),
    Q8_0: await timePeerPrefill(writeLlamaGguf(dir, { q8_0: true }), tokens, LABELS, { threads: THREADS, runs: RUNS }),
  };
  console.log(`parameters: ${billions(bf16.info.parameters!)} in all, ${billions(bf16.info.activeParameters!)} a token\n`);
  console.log('| engine | prefill ms | llama.cpp BF16 / engine | llama.cpp Q8_0 / engine | max abs diff of the 8 label probabilities vs llama.cpp BF16 |');
  console.log('|---|---|---|---|---|');
  const rows: [string, { ms: number; probs: number[] }][] = [
    ['llama.cpp BF16', peers.BF16], ['llama.cpp Q8_0', peers.Q8_0],
    [`tqserve bf16, exact (${bf16.info.kernels})`, bf16], [`tqserve int8 weights (${int8.info.quantizedKernels})`, int8],
  ];
  for (const [name, r] of rows)
    console.log(`| ${name} | ${fmt(r.ms)} | ${fmt(peers.BF16.ms / r.ms, 2)}x | ${fmt(peers.Q8_0.ms / r.ms, 2)}x | ${maxAbsDiff(r.probs, peers.BF16.probs).toExponential(1)} |`);

  console.log('\nThe compute follows the active parameters: the same weights, k experts a token (bf16, exact):\n');
  console.log('| experts a token | active parameters | prefill ms | ms per active billion | ms per billion in all |');
  console.log('|---|---|---|---|---|');
  for (const k of [1, 2, 4, 8]) {
    const r = await withExpertsPerToken(dir, k, (copy) => timeEngine({ path: copy, dtype: 'bf16' }, tokens, 1));
    const active = r.info.activeParameters!, all = r.info.parameters!;
    console.log(`| ${k} | ${billions(active)} | ${fmt(r.ms)} | ${fmt(r.ms / (active / 1e9))} | ${fmt(r.ms / (all / 1e9))} |`);
  }

  const checkpoint = fs.statSync(path.join(dir, 'model.safetensors')).size;
  console.log(`\nMemory: linear weights as the kernels keep them: bf16 ${fmt(bf16.info.linearBytes / 2 ** 20)} MiB, int8 ` +
    `${fmt(int8.info.linearBytes / 2 ** 20)} MiB; the checkpoint ${fmt(checkpoint / 2 ** 20)} MiB (embeddings and lm_head included); ` +
    `this process's resident memory with the bf16 engine loaded ${fmt(bf16.rss / 2 ** 20)} MiB; GGUF BF16 ` +
    `${fmt(fs.statSync(writeLlamaGguf(dir)).size / 2 ** 20)} MiB, Q8_0 ${fmt(fs.statSync(writeLlamaGguf(dir, { q8_0: true })).size / 2 ** 20)} MiB`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
