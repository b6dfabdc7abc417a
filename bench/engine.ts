/**
 * Engine benchmark (not a test): `npm run bench`.
 * On the bench-size model (Llama shape of a 0.5B model, random weights) it
 * reports, in one run: the GEMM rates of the prefill's shapes (M = 1,000) and of a
 * warm question's (M = 49) in bf16, on the batch-invariant kernels at every
 * instruction set level this CPU runs and on oneDNN's, side by side; prefill
 * tokens/s in bf16 at every level and on oneDNN's (--batch-invariant off), and in
 * fp32 on the default level and oneDNN's; the time the same
 * matmuls take alone (the machine's matmul limit for this prefill) and the
 * share of it the engine reaches; a reference GEMM rate; and the label readout
 * against a full lm_head projection. The peer, llama.cpp (node-llama-cpp's
 * prebuilt CPU binary), prefills the same token ids on the same weights
 * (written as GGUF, BF16) in the same run; label probabilities of both are
 * compared so that the timing comparison is between equal computations.
 */
import * as fs from 'fs';
import { Engine } from '../src/engine/engine';
import { writeLlamaGguf } from './peer/gguf';
import { LlamaCppPeer } from './peer/llamacpp';
import { Dtype, IsaLevel } from '../src/engine/native';
import { softmax } from '../src/answering/answers';
import { generateTestModel } from '../src/testmodels/generate';
import { testModels } from '../src/testmodels/specs';
import { ModelTokenizer } from '../src/tokenizer/tokenizer';
import { runnableIsaLevels } from '../test/helpers/cpu';
import { runCli } from '../test/helpers/tq-cli';

const STATE_TOKENS = Number(process.env.BENCH_STATE_TOKENS ?? 1000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x: number, d = 1) => x.toFixed(d);
const cpuModel = () => fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const maxAbsDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

async function stateTokens(dir: string): Promise<number[]> {
  const tok = ModelTokenizer.load(dir);
  const text =
    'The committee reviewed the quarterly figures, noted that shipping costs had risen by a third, ' +
    'and asked the regional offices to report any delays longer than two days before the next meeting. ';
  const unit = await tok.encode(text);
  const out: number[] = [];
  while (out.length < STATE_TOKENS) out.push(...unit);
  return out.slice(0, STATE_TOKENS);
}

/** One GEMM on the engine's kernels (invariant ones at level isa, else oneDNN's), timed by the engine's command-line program (csrc/cli/). */
async function gemmRate(m: number, k: number, n: number, dtype: Dtype, iterations: number, invariant: boolean, isa?: IsaLevel): Promise<{ gflops: number; ms: number }> {
  return runCli(['gemm', '--m', `${m}`, '--k', `${k}`, '--n', `${n}`, '--dtype', dtype, '--iterations', `${iterations}`,
    '--batch-invariant', invariant ? 'on' : 'off', '--threads', `${THREADS}`, ...(isa ? ['--isa', isa] : [])]);
}

/** The linear layers' shapes [K, N] as the engine runs them: q, k and v stacked in one GEMM; o; gate; up; down. */
function layerShapes(): [string, number, number][] {
  const s = testModels['bench-llama'];
  const q = s.heads * s.headDim, kv = s.kvHeads * s.headDim;
  return [['qkv', s.hiddenSize, q + 2 * kv], ['o', q, s.hiddenSize], ['gate', s.hiddenSize, s.intermediateSize],
    ['up', s.hiddenSize, s.intermediateSize], ['down', s.intermediateSize, s.hiddenSize]];
}

/**
 * bf16 GEMM rates of the prefill's (M = 1,000) and a warm question's (M = 49) shapes, every invariant
 * level beside oneDNN's, fastest of 7 (of 200 at M = 49). Each shape's columns run one after the other, so that they meet
 * the shared machine in about the same state.
 */
async function gemmTable(levels: IsaLevel[]) {
  console.log(`bf16 GEMM GFLOP/s (fastest of 7 at M = 1,000, of 200 at M = 49; ${THREADS} threads), invariant kernels by level and oneDNN's:
`);
  console.log(`| M x K x N | ${levels.map((l) => `invariant ${l}`).join(' | ')} | oneDNN | best invariant / oneDNN |`);
  console.log(`|---|${levels.map(() => '---|').join('')}---|---|`);
  const seen = new Set<string>();
  for (const m of [1000, 49])
    for (const [, k, n] of layerShapes()) {
      if (seen.has(`${m}x${k}x${n}`)) continue;
      seen.add(`${m}x${k}x${n}`);
      // A GEMM at M = 49 takes about 0.1 ms: the fastest of 7 was at the mercy of one interruption
      // of the shared machine (one run printed 224-269 GFLOP/s where direct runs gave 650-720).
      const iterations = m < 100 ? 200 : 7;
      const rates: number[] = [];
      for (const isa of levels) rates.push((await gemmRate(m, k, n, 'bf16', iterations, true, isa)).gflops);
      const onednn = (await gemmRate(m, k, n, 'bf16', iterations, false)).gflops;
      console.log(`| ${m} x ${k} x ${n} | ${rates.map((r) => fmt(r, 0)).join(' | ')} | ${fmt(onednn, 0)} | ${fmt(rates[0] / onednn, 2)} |`);
    }
  console.log('');
}

/** The prefill's matmuls, timed alone at the same M on the engine's kernels: [ms, GFLOP]. */
async function matmulLimit(m: number, dtype: Dtype, invariant: boolean, isa?: IsaLevel): Promise<[number, number]> {
  const s = testModels['bench-llama'];
  let ms = 0, flop = 0;
  for (const [, k, n] of layerShapes()) {
    ms += (await gemmRate(m, k, n, dtype, 5, invariant, isa)).ms * s.layers;
    flop += 2 * m * k * n * s.layers;
  }
  return [ms, flop / 1e9];
}

async function main() {
  const dir = generateTestModel('bench-llama');
  const tokens = await stateTokens(dir);
  const s = testModels['bench-llama'];
  console.log(`# tqserve engine benchmark`);
  console.log(`model: bench-llama (${s.architecture}, hidden ${s.hiddenSize}, ${s.layers} layers, ${s.heads}/${s.kvHeads} heads, ` +
    `FFN ${s.intermediateSize}, vocab ${s.vocabSize}, random N(0, ${s.std}) weights stored ${s.storedDtype})`);
  const levels = runnableIsaLevels();
  console.log(`CPU: ${cpuModel()}; instruction set levels it runs: ${levels.join(', ')}\n`);
  await gemmTable(levels);
  console.log(`Prefill. state: ${tokens.length} tokens; ${THREADS} threads; median of ${RUNS} runs after one warm-up\n`);
  console.log('| dtype | kernels | prefill ms | tokens/s | same matmuls alone, ms | matmul GFLOP/s (engine / alone) | share of matmul limit | GEMM 512x896x4864 GFLOP/s |');
  console.log('|---|---|---|---|---|---|---|---|');
  const notes: string[] = [];
  const readout: string[] = [];
  // The state's last token is the question, so both engines read the labels at the same position.
  const labelIds = [330, 365, 334, 384, 413, 401, 420, 382]; // ▁A ... ▁H in the Mistral vocabulary
  const prefillRequest = { state: tokens, questions: [{ tokens: [tokens[0]], labelIds }] };
  const request = { state: tokens.slice(0, -1), questions: [{ tokens: tokens.slice(-1), labelIds }] };
  const ours: Record<string, { ms: number; probs: number[] }> = {};
  // bf16 (the default dtype) at every level and on oneDNN's; fp32 at the best level and on oneDNN's.
  const variants: { dtype: Dtype; invariant: boolean; isa?: IsaLevel }[] = [...levels.map((isa) => ({ dtype: 'bf16' as Dtype, invariant: true, isa })),
    { dtype: 'bf16', invariant: false }, { dtype: 'fp32', invariant: true }, { dtype: 'fp32', invariant: false }];
  for (const { dtype, invariant, isa } of variants) {
    // No prefix cache: every run computes the whole state.
    const engine = await Engine.open({ path: dir, dtype, threads: THREADS, prefixCache: false, batchInvariant: invariant, isa });
    const kernels = invariant ? `invariant (${engine.info.kernels})` : 'oneDNN';
    const label = `${dtype} ${kernels}`;
    if (engine.info.dtypeNote) notes.push(`${label}: ${engine.info.dtypeNote}`);
    await engine.answer(prefillRequest);
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) times.push((await engine.answer(prefillRequest)).timing.stateMs);
    const prefill = median(times);
    // End to end for the peer comparison: 999 state tokens + a 1-token question, engine time.
    const whole: number[] = [];
    let last!: Float32Array;
    for (let i = 0; i < RUNS; i++) {
      const r = await engine.answer(request);
      whole.push(r.timing.stateMs + r.timing.questionsMs + r.timing.readoutMs);
      last = r.answers[0].labelLogits;
    }
    ours[label] = { ms: median(whole), probs: softmax(last, 1) };
    const computeDtype = engine.info.dtype;  // fp32 where oneDNN has no bf16 matmul
    const [aloneMs, gflop] = await matmulLimit(tokens.length, computeDtype, invariant, isa);
    const ref = await gemmRate(512, 896, 4864, computeDtype, 10, invariant, isa);
    console.log(`| ${dtype} | ${kernels} | ${fmt(prefill)} | ${fmt((tokens.length / prefill) * 1000, 0)} | ${fmt(aloneMs)} | ` +
      `${fmt(gflop / (prefill / 1000), 0)} / ${fmt(gflop / (aloneMs / 1000), 0)} | ${fmt((100 * aloneMs) / prefill, 0)}% | ${fmt(ref.gflops, 0)} |`);
    await engine.close();
    if (invariant && isa && isa !== levels[0]) continue;  // the readout does not depend on the kernels' level
    const r = await runCli(['readout', '--model', dir, '--dtype', dtype, '--labels', '8', '--iterations', '50', '--threads', `${THREADS}`]);
    readout.push(`| ${label} | ${fmt(r.readoutMs, 4)} | ${fmt(r.fullMs, 3)} | ${fmt(r.fullMs / r.readoutMs, 0)}x |`);
  }
  // The peer: same weights, same token ids, batch 1024, default (F16) KV cache: its best practice.
  const peer = await LlamaCppPeer.open(writeLlamaGguf(dir), { threads: THREADS, contextSize: 2048, batchSize: 1024 });
  await peer.prefill(tokens, labelIds);
  const peerRuns: { ms: number; labelLogits: number[] }[] = [];
  for (let i = 0; i < RUNS; i++) peerRuns.push(await peer.prefill(tokens, labelIds));
  await peer.close();
  const peerMs = median(peerRuns.map((r) => r.ms));
  const peerProbs = softmax(peerRuns[0].labelLogits, 1);
  console.log(`\nPeer: llama.cpp (node-llama-cpp prebuilt CPU, GGUF BF16 of the same weights, ${THREADS} threads, batch 1024), same ${tokens.length} token ids:\n`);
  console.log('| engine | 1,000 tokens to label logits, ms | llama.cpp / engine | max abs diff of the 8 label probabilities vs llama.cpp |');
  console.log('|---|---|---|---|');
  console.log(`| llama.cpp | ${fmt(peerMs)} | 1.00x | - |`);
  for (const [label, o] of Object.entries(ours)) {
    console.log(`| tqserve ${label} | ${fmt(o.ms)} | ${fmt(peerMs / o.ms, 2)}x | ${maxAbsDiff(o.probs, peerProbs).toExponential(1)} |`);
  }
  notes.forEach((n) => console.log(`\nNote: ${n}`));
  console.log(`\nReadout of 8 label rows vs the full lm_head projection (1 x ${s.hiddenSize} @ ${s.hiddenSize} x ${s.vocabSize}), median of 50:\n`);
  console.log('| dtype, kernels | readout ms | full projection ms | full / readout |');
  console.log('|---|---|---|---|');
  readout.forEach((l) => console.log(l));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
