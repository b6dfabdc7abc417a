/**
 * The llama.cpp side of the serving benchmark, run in its own process so its
 * peak memory is its own. Input (argv[2]): a JSON file with the GGUF path and
 * the token ids tqserve rendered; output: one JSON line of results on stdout.
 * Practice: the state's KV is kept in the sequence and each question is
 * evaluated on top of it, then erased (llama.cpp's prompt-cache reuse).
 * With argv[3] = --cold-on-request it only runs cold questions, one per line
 * read from stdin, so that the benchmark can alternate them with tqserve's.
 */
import * as fs from 'fs';
import * as readline from 'readline';
import type { LlamaContextSequence, Token } from 'node-llama-cpp';
import { median, quantile } from '../workload';

const importEsm = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<typeof import('node-llama-cpp')>;

interface Input {
  gguf: string;
  threads: number;
  state: number[]; // the cold question's state
  coldQuestion: number[];
  coldLabels: number[];
  sixteenRuns: number;
  sixteenState: number[];
  questions: number[][]; // the 16 questions' own tokens (after sixteenState)
  labels: number[][]; // each question's label ids
  clientStates: number[][];
  concurrentSeconds: number;
}


/** Evaluates `tokens` on top of the sequence; returns the label log-probabilities at the last one. */
async function readLabels(seq: LlamaContextSequence, tokens: number[], labels: number[]): Promise<number[]> {
  const input = tokens.map((t, i) => (i === tokens.length - 1 ? [t as Token, { generateNext: { probabilities: true } }] : (t as Token)));
  const out = await seq.controlledEvaluate(input as any);
  const probs = out[tokens.length - 1]!.next.probabilities!;
  return labels.map((id) => Math.log(probs.get(id as Token) ?? 0));
}

async function rewind(seq: LlamaContextSequence, to: number) {
  if (seq.nextTokenIndex > to) await seq.eraseContextTokenRanges([{ start: to, end: seq.nextTokenIndex }]);
}

async function main() {
  const input: Input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const { getLlama } = await importEsm('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as any });
  const model = await llama.loadModel({ modelPath: input.gguf, gpuLayers: 0 });
  const ctx = await model.createContext({ contextSize: 2048, batchSize: 1024, threads: input.threads, sequences: 1 });
  const seq = ctx.getSequence();
  const n = input.state.length;
  if (process.argv[3] === '--cold-on-request') {
    console.log(JSON.stringify({ ready: true }));
    for await (const _line of readline.createInterface({ input: process.stdin })) {
      await seq.clearHistory();
      const t0 = performance.now();
      const labels = await readLabels(seq, [...input.state, ...input.coldQuestion], input.coldLabels);
      console.log(JSON.stringify({ ms: performance.now() - t0, labels }));
    }
    await ctx.dispose();
    await model.dispose();
    await llama.dispose();
    return;
  }

  // Sixteen questions on one state: the state once, each question on top of it.
  const sixteen: number[] = [];
  let sixteenLabels: number[][] = [];
  for (let i = 0; i < input.sixteenRuns; i++) {
    await seq.clearHistory();
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(input.sixteenState as Token[]);
    sixteenLabels = [];
    for (let q = 0; q < input.questions.length; q++) {
      sixteenLabels.push(await readLabels(seq, input.questions[q], input.labels[q]));
      await rewind(seq, input.sixteenState.length);
    }
    sixteen.push(performance.now() - t0);
  }
  // Warm: the cold state's KV is kept; one question.
  await seq.clearHistory();
  await seq.evaluateWithoutGeneratingNewTokens(input.state as Token[]);
  const warm: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await readLabels(seq, input.coldQuestion, input.coldLabels);
    warm.push(performance.now() - t0);
    await rewind(seq, n);
  }
  await ctx.dispose();

  // Concurrent clients: one sequence each, its state kept, one question per request.
  const clients = input.clientStates.length;
  const cctx = await model.createContext({ contextSize: 2048 * clients, batchSize: 1024, threads: input.threads, sequences: clients });
  const latencies: number[] = [];
  // Every client's state is evaluated first (as tqserve's clients' states are cached before timing).
  const seqs = input.clientStates.map(() => cctx.getSequence());
  await Promise.all(seqs.map((s, c) => s.evaluateWithoutGeneratingNewTokens(input.clientStates[c] as Token[])));
  const started = performance.now();
  const deadline = started + input.concurrentSeconds * 1000;
  await Promise.all(
    input.clientStates.map(async (state, c) => {
      const s = seqs[c];
      while (performance.now() < deadline) {
        const t0 = performance.now();
        await readLabels(s, input.coldQuestion, input.coldLabels);
        latencies.push(performance.now() - t0);
        await rewind(s, state.length);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  await cctx.dispose();
  await model.dispose();
  await llama.dispose();
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const peakKiB = Number(/VmHWM:\s+(\d+)/.exec(status)![1]);
  console.log(
    JSON.stringify({
      sixteenMs: median(sixteen),
      sixteenLabels,
      warmMs: median(warm),
      concurrent: { requests: latencies.length, perSecond: latencies.length / elapsed, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) },
      peakMiB: peakKiB / 1024,
    }),
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
