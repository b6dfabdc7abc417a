/**
 * What int8 weights cost in fidelity (not a test): `npm run bench:quantization`.
 * For each architecture's test model and the bench model, the real server answers the same 200 questions
 * (20 states of 60-400 words, each asked 10 questions: yes/no, 4-option choices, 3-level scores) three
 * times: bf16, bf16 with --quantization int8, and fp32 (the reference: fp32 is within 3e-6 of a float64
 * forward in logits, test/engine/parity.test.ts). It prints max and mean |Δp| over every label
 * probability of every answer: int8 against bf16, int8 against the reference, and bf16 against the
 * reference beside them for scale; and, for int8 against bf16, the drift of the label logits themselves (each
 * answer's less their mean), which does not depend on how confident the answer is, beside how confident the
 * answers are (the largest label probability of each). The models have random weights: see docs/quantization.md for what that
 * does and does not say about a trained checkpoint. For scale again, on bench-llama (a Llama, which the GGUF
 * writer takes), llama.cpp's own 8-bit format: the first 50 questions' prompt token ids (from tqserve's debug
 * readout) through llama.cpp with the weights as BF16 and as Q8_0, and the same drift measured on the label
 * logits of both engines (softmax at temperature 1, as llama.cpp gives them).
 */
import * as fs from 'fs';
import { softmax } from '../src/answering/answers';
import { uniformStream } from '../src/common/prng';
import { generateTestModel } from '../src/testmodels/generate';
import { tinyModelNames } from '../src/testmodels/specs';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { writeLlamaGguf } from './peer/gguf';
import { LlamaCppPeer } from './peer/llamacpp';
import { median } from './workload';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
// An answer this sure (its largest label probability, bf16) is a trained model's usual case, not a random one's.
const CONFIDENT = 0.8;
// Test model names, or checkpoint folders (a real checkpoint: what int8 costs on it).
const MODELS = (process.env.BENCH_MODELS ?? [...tinyModelNames, 'bench-llama'].join(',')).split(',');

const sentences = [
  'The parcel from Lyon arrived two days late and the box was torn at one corner.',
  'Our team reviewed the quarterly figures and found that shipping costs rose by a third.',
  'The customer asked for a refund because the replacement part did not fit the machine.',
  'Nobody from the regional office answered the three emails sent last week.',
  'The new carrier delivered every order on time, and the warehouse staff were pleased.',
  'A meeting is planned for Thursday to discuss the delays and the contract renewal.',
  'The invoice listed two items that were never ordered, and the total was wrong.',
  'After the storm, the roads to the northern depot stayed closed for four days.',
  'The manager thanked the drivers for working through the holiday weekend.',
  'Several clients complained that the tracking page showed the wrong delivery date.',
];
// The main route's question types (System One): yes/no, a 4-option choice, a 3-level score.
const kinds = [
  (i: number) => ({ type: 'noul', instructions: `Does the text mention ${['a delay', 'a refund', 'a meeting', 'damage', 'a complaint'][i % 5]}?` }),
  (i: number) => ({ type: 'choice', instructions: `Question ${i}: what is the main topic?`, criteria: { costs: null, delays: null, carriers: null, staffing: null } }),
  (i: number) => ({ type: 'score', instructions: `How ${['urgent', 'negative', 'formal'][i % 3]} is the text?`, criteria: ['low', 'medium', 'high'] }),
];

/** 20 states of 6-40 sentences, 10 questions each, from a fixed seed. */
function workload() {
  const rnd = uniformStream(31);
  return Array.from({ length: 20 }, (_, s) => {
    const n = 6 + Math.floor(rnd() * 35);
    const state = Array.from({ length: n }, () => sentences[Math.floor(rnd() * sentences.length)]).join(' ');
    return { state, questions: Object.fromEntries(Array.from({ length: 10 }, (_, q) => [`q${q}`, kinds[(s + q) % 3](s * 10 + q)])) };
  });
}

interface Readout { prompt_token_ids: number[]; label_token_ids: number[]; label_logits: number[] }

/** Every label probability of every answer, in order, from one server; and each answer's debug readout. */
async function probabilities(dir: string, args: string[]): Promise<{ probs: number[]; readouts: Readout[] }> {
  const { child, output, exited } = runServerProcess(['--base', dir, '--threads', String(THREADS), '--port', '0', '--debug-readout', ...args]);
  try {
    const url = await listeningUrl(output, exited);
    const probs: number[] = [], readouts: Readout[] = [];
    for (const request of workload()) {
      const res = await fetch(`${url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-debug': 'readout' }, body: JSON.stringify(request) });
      const body: any = await res.json();
      if (res.status !== 200) throw new Error(`${res.status}: ${JSON.stringify(body)}`);
      for (const name of Object.keys(request.questions)) {
        const a = body.answers[name];
        probs.push(...(a.type === 'noul' ? [a.noul, 1 - a.noul] : Object.values<number>(a.probabilities)));
        readouts.push(body.readout[name]);
      }
    }
    return { probs, readouts };
  } finally {
    child.kill();
    await exited;
  }
}

/** Label logits of each prompt through llama.cpp on a GGUF of the model. */
async function llamaCppLogits(gguf: string, readouts: Readout[]): Promise<number[][]> {
  const peer = await LlamaCppPeer.open(gguf, { threads: THREADS, contextSize: 2048, batchSize: 1024 });
  try {
    const out: number[][] = [];
    for (const r of readouts) out.push((await peer.prefill(r.prompt_token_ids, r.label_token_ids)).labelLogits);
    return out;
  } finally {
    await peer.close();
  }
}

const flatProbs = (logits: number[][]) => logits.flatMap((l) => softmax(l, 1));

/** Each answer's label logits less their mean (what the probabilities depend on), flattened. */
const centred = (rs: Readout[]) => rs.flatMap((r) => r.label_logits.map((l) => l - r.label_logits.reduce((s, x) => s + x, 0) / r.label_logits.length));

function compare(a: number[], b: number[]) {
  const d = a.map((x, i) => Math.abs(x - b[i]));
  return `${Math.max(...d).toExponential(1)} / ${(d.reduce((s, x) => s + x, 0) / d.length).toExponential(1)}`;
}

async function main() {
  console.log(`# int8 weights: label probabilities, max / mean |Δp| over 200 questions (${THREADS} threads)\n`);
  console.log('| model | int8 vs bf16 | int8 vs fp32 (reference) | bf16 vs fp32 (reference) | probabilities compared | ' +
    `int8 vs bf16, centred label logits | largest probability of an answer (bf16), median / max | int8 vs bf16, max, answers with one at ${CONFIDENT} or more (how many) |`);
  console.log('|---|---|---|---|---|---|---|---|');
  let llama: { dir: string; bf16: Readout[]; int8: Readout[] } | undefined;
  for (const name of MODELS) {
    const dir = fs.existsSync(name) ? name : generateTestModel(name);
    const bf16 = await probabilities(dir, ['--dtype', 'bf16']);
    const int8 = await probabilities(dir, ['--dtype', 'bf16', '--quantization', 'int8']);
    const fp32 = await probabilities(dir, ['--dtype', 'fp32']);
    const top = bf16.readouts.map((r) => Math.max(...softmax(r.label_logits, 1)));
    const confident = top.flatMap((p, i) => (p >= CONFIDENT ? [i] : []));
    const confidentDrift = confident.length === 0 ? '-' : `${Math.max(...confident.flatMap((i) => {
      const a = softmax(int8.readouts[i].label_logits, 1), b = softmax(bf16.readouts[i].label_logits, 1);
      return a.map((x, j) => Math.abs(x - b[j]));
    })).toExponential(1)} (${confident.length})`;
    console.log(`| ${name} | ${compare(int8.probs, bf16.probs)} | ${compare(int8.probs, fp32.probs)} | ${compare(bf16.probs, fp32.probs)} | ` +
      `${bf16.probs.length} | ${compare(centred(int8.readouts), centred(bf16.readouts))} | ${median(top).toFixed(2)} / ${Math.max(...top).toFixed(2)} | ` +
      `${confidentDrift} |`);
    if (name === 'bench-llama') llama = { dir, bf16: bf16.readouts.slice(0, 50), int8: int8.readouts.slice(0, 50) };
  }
  if (!llama) return;
  const peerBf16 = await llamaCppLogits(writeLlamaGguf(llama.dir), llama.bf16);
  const peerQ8 = await llamaCppLogits(writeLlamaGguf(llama.dir, { q8_0: true }), llama.bf16);
  const ours = (rs: Readout[]) => flatProbs(rs.map((r) => r.label_logits));
  console.log(`\nbench-llama, the first 50 questions, label logits at temperature 1, max / mean |Δp|:\n`);
  console.log('| engine | 8-bit vs its bf16 | its bf16 vs the other engine\'s bf16 |');
  console.log('|---|---|---|');
  console.log(`| tqserve int8 | ${compare(ours(llama.int8), ours(llama.bf16))} | ${compare(ours(llama.bf16), flatProbs(peerBf16))} |`);
  console.log(`| llama.cpp Q8_0 | ${compare(flatProbs(peerQ8), flatProbs(peerBf16))} | |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
