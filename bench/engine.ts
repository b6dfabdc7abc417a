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
 * against a full lm_head projection; and int8 weights against bf16 in
 * alternating engine processes. The peer, llama.cpp (node-llama-cpp's
 * prebuilt CPU binary), prefills the same token ids on the same weights
 * (written as GGUF, BF16) in the same run; label probabilities of both are
 * compared so that the timing comparison is between equal computations.
 * BENCH_LEVELS (e.g. "avx2") measures only the levels named, best first (default: every level this CPU runs; the
 * generic level takes as long as all the others on a slow machine).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../src/engine/engine';
import { writeLlamaGguf } from './peer/gguf';
import { timePeerPrefill } from './peer/llamacpp';
import { median, paragraphTokens, timeEngineAnswers } from './workload';
import { Dtype, IsaLevel, NativeAnswerRequest, Quantization } from '../src/engine/native';
import { generateTestModel } from '../src/testmodels/generate';
import { testModels } from '../src/testmodels/specs';
import { runnableIsaLevels, runsBf16Amx } from '../test/helpers/cpu';
import { runCli } from '../test/helpers/tq-cli';

const STATE_TOKENS = Number(process.env.BENCH_STATE_TOKENS ?? 1000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const ALTERNATIONS = Number(process.env.BENCH_ALTERNATIONS ?? 7);

const fmt = (x: number, d = 1) => (Number.isNaN(x) ? 'n/a' : x.toFixed(d));
const cpuModel = () => fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const maxAbsDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

/**
 * One GEMM on the engine's kernels (invariant ones at level isa, else oneDNN's; int8: the int8 GEMM), timed by the
 * engine's command-line program (csrc/cli/).
 */
async function gemmRate(m: number, k: number, n: number, dtype: Dtype, iterations: number, invariant: boolean, isa?: IsaLevel, quantization: Quantization = 'none',
  arithmetic: 'portable' | 'native' = 'portable'): Promise<{ gflops: number; ms: number }> {
  return runCli(['gemm', '--m', `${m}`, '--k', `${k}`, '--n', `${n}`, '--dtype', dtype, '--iterations', `${iterations}`,
    '--batch-invariant', invariant ? 'on' : 'off', '--threads', `${THREADS}`, '--quantization', quantization, '--arithmetic', arithmetic, ...(isa ? ['--isa', isa] : [])]);
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
  // The native arithmetic (bf16 on AMX tiles) where the CPU has AMX-BF16.
  const native = runsBf16Amx();
  console.log(`| M x K x N | ${levels.map((l) => `invariant ${l}`).join(' | ')} | oneDNN | best invariant / oneDNN | int8 (GOP/s) | int8 / best invariant |${native ? ' native (AMX bf16) | native / best invariant |' : ''}`);
  console.log(`|---|${levels.map(() => '---|').join('')}---|---|---|---|${native ? '---|---|' : ''}`);
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
      // oneDNN has no bf16 matmul without AVX-512: n/a there.
      const onednn = await gemmRate(m, k, n, 'bf16', iterations, false).then((r) => r.gflops, () => NaN);
      const int8 = (await gemmRate(m, k, n, 'bf16', iterations, true, undefined, 'int8')).gflops;
      const amx = native ? (await gemmRate(m, k, n, 'bf16', iterations, true, undefined, 'none', 'native')).gflops : NaN;
      const nativeCells = native ? ` ${fmt(amx, 0)} | ${fmt(amx / rates[0], 2)} |` : '';
      console.log(`| ${m} x ${k} x ${n} | ${rates.map((r) => fmt(r, 0)).join(' | ')} | ${fmt(onednn, 0)} | ${fmt(rates[0] / onednn, 2)} | ${fmt(int8, 0)} | ${fmt(int8 / rates[0], 2)} |${nativeCells}`);
    }
  console.log('');
}

/** The prefill's matmuls, timed alone at the same M on the engine's kernels: [ms, GFLOP]. */
async function matmulLimit(m: number, dtype: Dtype, invariant: boolean, isa?: IsaLevel, quantization: Quantization = 'none',
  arithmetic: 'portable' | 'native' = 'portable'): Promise<[number, number]> {
  const s = testModels['bench-llama'];
  let ms = 0, flop = 0;
  for (const [, k, n] of layerShapes()) {
    ms += (await gemmRate(m, k, n, dtype, 5, invariant, isa, quantization, arithmetic)).ms * s.layers;
    flop += 2 * m * k * n * s.layers;
  }
  return [ms, flop / 1e9];
}

/**
 * int8 against bf16 on the same prefill, in alternating engine processes (tq_cli, as the server runs one engine
 * per process), so that both meet the shared machine in the same state: the table above times each variant in
 * its own stretch of minutes, and this machine's speed moves by more than 10% between them (a GEMM timed alone
 * ran at half its rate in one of three tries, 2026-11-25). Each process: one warm-up call, then the median of 3.
 * Engines in one process measured slower and noisier here (int8 509 against 479 ms alone; pairs 1.48-1.63x).
 */
async function int8AgainstBf16(dir: string, request: NativeAnswerRequest) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-bench-'));
  const calls = path.join(folder, 'calls.json');
  fs.writeFileSync(calls, JSON.stringify({ calls: [[request]] }));
  const time = async (quantization: Quantization) => {
    const out = await runCli(['answer', '--model', dir, '--calls', calls, '--dtype', 'bf16', '--threads', `${THREADS}`,
      '--prefix-cache', 'off', '--quantization', quantization, '--repeat', '4']);
    return median((out.wallMs as number[][]).slice(1).map((call) => call[0]));
  };
  const times: Record<'bf16' | 'int8', number[]> = { bf16: [], int8: [] };
  for (let i = 0; i < ALTERNATIONS; i++) {
    times.bf16.push(await time('none'));
    times.int8.push(await time('int8'));
  }
  fs.rmSync(folder, { recursive: true });
  const ratios = times.bf16.map((b, i) => b / times.int8[i]);
  console.log(`\nint8 against bf16, ${request.state.length + request.questions[0].tokens.length} tokens to label logits (tq_cli answer), ${ALTERNATIONS} pairs of processes ` +
    `alternating: bf16 ${fmt(median(times.bf16))} ms, int8 ${fmt(median(times.int8))} ms (medians); bf16 / int8 per pair: median ` +
    `${fmt(median(ratios), 2)}x, range ${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)}x`);
}

async function main() {
  const dir = generateTestModel('bench-llama');
  const tokens = await paragraphTokens(dir, STATE_TOKENS);
  const s = testModels['bench-llama'];
  console.log(`# tqserve engine benchmark`);
  console.log(`model: bench-llama (${s.architecture}, hidden ${s.hiddenSize}, ${s.layers} layers, ${s.heads}/${s.kvHeads} heads, ` +
    `FFN ${s.intermediateSize}, vocab ${s.vocabSize}, random N(0, ${s.std}) weights stored ${s.storedDtype})`);
  const levels = process.env.BENCH_LEVELS ? (process.env.BENCH_LEVELS.split(',') as IsaLevel[]) : runnableIsaLevels();
  console.log(`CPU: ${cpuModel()}; instruction set levels it runs: ${runnableIsaLevels().join(', ')}; measured here: ${levels.join(', ')}\n`);
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
  // And bf16 with int8 weights (--quantization int8) on the CPU's best int8 path, and on AVX2's.
  const variants: { dtype: Dtype; invariant: boolean; isa?: IsaLevel; quantization?: Quantization; arithmetic?: 'native' }[] = [
    ...levels.map((isa) => ({ dtype: 'bf16' as Dtype, invariant: true, isa })),
    // The default: the level measured fastest at load (csrc/kernels/cpu/level_choice.h).
    { dtype: 'bf16', invariant: true, isa: undefined },
    { dtype: 'bf16', invariant: true, quantization: 'int8' },
    // int8 where AVX-512 VNNI is missing: the AVX2 path (gemm_maddubs.cpp), beside bf16 at the same level.
    ...(levels.includes('avx2') && levels[0] !== 'avx2' ? [{ dtype: 'bf16' as Dtype, invariant: true, isa: 'avx2' as IsaLevel, quantization: 'int8' as Quantization }] : []),
    // The native arithmetic: bf16 on AMX tiles (docs/arithmetic.md), where the CPU has AMX-BF16.
    ...(runsBf16Amx() ? [{ dtype: 'bf16' as Dtype, invariant: true, arithmetic: 'native' as const }] : []),
    { dtype: 'bf16', invariant: false }, { dtype: 'fp32', invariant: true }, { dtype: 'fp32', invariant: false }];
  const weightBytes: Record<string, number> = {};
  for (const { dtype, invariant, isa, quantization, arithmetic } of variants) {
    // No prefix cache: every run computes the whole state.
    const engine = await Engine.open({ path: dir, dtype, threads: THREADS, prefixCache: false, batchInvariant: invariant, isa, quantization, arithmetic });
    const kernels = quantization === 'int8' ? `int8 weights (${engine.info.quantizedKernels}), quantized in ${fmt(engine.info.weightsMs, 0)} ms`
      : arithmetic === 'native' ? 'native arithmetic (AMX bf16 tiles)'
      : invariant ? `invariant (${engine.info.kernels}${isa ? '' : `, the default: ${engine.info.levelChoice?.how}`})` : 'oneDNN';
    weightBytes[quantization ?? dtype] ??= engine.info.linearBytes;
    const label = `${dtype} ${kernels}`;
    if (engine.info.dtypeNote) notes.push(`${label}: ${engine.info.dtypeNote}`);
    await engine.answer(prefillRequest);
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) times.push((await engine.answer(prefillRequest)).timing.stateMs);
    const prefill = median(times);
    // End to end for the peer comparison: 999 state tokens + a 1-token question, engine time.
    ours[label] = await timeEngineAnswers(engine, request, RUNS);
    const computeDtype = engine.info.dtype;  // fp32 where oneDNN has no bf16 matmul
    const [aloneMs, gflop] = await matmulLimit(tokens.length, computeDtype, invariant, isa, quantization, arithmetic);
    const ref = await gemmRate(512, 896, 4864, computeDtype, 10, invariant, isa, quantization, arithmetic);
    console.log(`| ${dtype} | ${kernels} | ${fmt(prefill)} | ${fmt((tokens.length / prefill) * 1000, 0)} | ${fmt(aloneMs)} | ` +
      `${fmt(gflop / (prefill / 1000), 0)} / ${fmt(gflop / (aloneMs / 1000), 0)} | ${fmt((100 * aloneMs) / prefill, 0)}% | ${fmt(ref.gflops, 0)} |`);
    await engine.close();
    if ((invariant && isa && isa !== levels[0]) || quantization) continue;  // the readout does not depend on the kernels
    const r = await runCli(['readout', '--model', dir, '--dtype', dtype, '--labels', '8', '--iterations', '50', '--threads', `${THREADS}`]);
    readout.push(`| ${label} | ${fmt(r.readoutMs, 4)} | ${fmt(r.fullMs, 3)} | ${fmt(r.fullMs / r.readoutMs, 0)}x |`);
  }
  // The peer: same weights, same token ids, batch 1024, default (F16) KV cache: its best practice. Twice:
  // the weights as BF16, and the layers' weights as Q8_0 (what llama.cpp users quantize to at 8 bits).
  const peerRun = (gguf: string) => timePeerPrefill(gguf, tokens, labelIds, { threads: THREADS, runs: RUNS });
  await int8AgainstBf16(dir, request);
  const peers = { 'BF16': await peerRun(writeLlamaGguf(dir)), 'Q8_0': await peerRun(writeLlamaGguf(dir, { q8_0: true })) };
  console.log(`\nPeer: llama.cpp (node-llama-cpp prebuilt CPU, GGUF of the same weights: BF16, and Q8_0 layers; ${THREADS} threads, batch 1024), same ${tokens.length} token ids:\n`);
  console.log('| engine | 1,000 tokens to label logits, ms | llama.cpp BF16 / engine | llama.cpp Q8_0 / engine | max abs diff of the 8 label probabilities vs llama.cpp BF16 |');
  console.log('|---|---|---|---|---|');
  for (const [name, p] of Object.entries(peers))
    console.log(`| llama.cpp ${name} | ${fmt(p.ms)} | ${fmt(peers.BF16.ms / p.ms, 2)}x | ${fmt(peers.Q8_0.ms / p.ms, 2)}x | ${maxAbsDiff(p.probs, peers.BF16.probs).toExponential(1)} |`);
  for (const [label, o] of Object.entries(ours)) {
    console.log(`| tqserve ${label} | ${fmt(o.ms)} | ${fmt(peers.BF16.ms / o.ms, 2)}x | ${fmt(peers.Q8_0.ms / o.ms, 2)}x | ${maxAbsDiff(o.probs, peers.BF16.probs).toExponential(1)} |`);
  }
  console.log(`\nLinear weights as the kernels keep them: bf16 ${fmt(weightBytes.bf16 / 2 ** 20)} MiB, int8 ${fmt(weightBytes.int8 / 2 ** 20)} MiB ` +
    `(${fmt(weightBytes.int8 / weightBytes.bf16, 2)}x); GGUF files: BF16 ${fmt(fs.statSync(writeLlamaGguf(dir)).size / 2 ** 20)} MiB, ` +
    `Q8_0 ${fmt(fs.statSync(writeLlamaGguf(dir, { q8_0: true })).size / 2 ** 20)} MiB`);
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
