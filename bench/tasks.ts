/**
 * Tasks benchmark (not a test): `npm run bench:tasks`. On random-weight models, through the real
 * server over HTTP (docs/tasks.md):
 *   1. keyword: 12 options, the answer named by a keyword among L = 0, 4, 12 filler words;
 *      n = 240. The record's cross-validated accuracy and NLL (readout, calibrated, head) against
 *      a fresh held-out set of 240 through /v1/systemone (with the task, then without it);
 *   2. class prior: 4 options labelled 70/10/10/10 independently of the text (n = 200), and a
 *      skewed 12-option variant (n = 240): what is kept;
 *   3. null: 20 seeds of random labels over the keyword question (n = 120 each): heads kept
 *      (always wrong: the labels carry nothing), calibrations kept that do worse than the baseline
 *      on a fresh held-out set (wrong), of 20;
 *   4. fitting time: 1,000 examples with 77 options, hidden states from bench-llama (hidden size
 *      896) as --head-engine, the question first so that its 77 options are computed once
 *      (--layout question-first), and the main route's latency during that registration.
 * TASKS_SKIP (comma-separated numbers) leaves parts out.
 */
import { uniformStream } from '../src/common/prng';
import { rawRequest, startServerProcess } from '../test/helpers/server-process';
import { codeWords, keywordExamples, keywordQuestion, priorExamples } from '../test/helpers/tasks';

const skip = new Set((process.env.TASKS_SKIP ?? '').split(',').filter(Boolean).map(Number));

const server = (args: string[]) => startServerProcess(['--port', '0', '--dtype', 'fp32', ...args]);
type Server = Awaited<ReturnType<typeof server>>;

const f = (x: number, d = 3) => x.toFixed(d);

/** Accuracy and NLL (with standard errors) of held-out examples through /v1/systemone. */
async function heldOut(s: Server, examples: { request: any; answer: string }[]) {
  const nll: number[] = [], right: number[] = [];
  for (const e of examples) {
    const r = await s.post('/v1/systemone', e.request);
    const a = Object.values(r.body.answers)[0] as any;
    nll.push(-Math.log(Math.max(a.probabilities[e.answer], 1e-300)));
    right.push(a.choice === e.answer ? 1 : 0);
  }
  const mean = (v: number[]) => v.reduce((x, y) => x + y, 0) / v.length;
  const se = (v: number[]) => Math.sqrt(v.reduce((x, y) => x + (y - mean(v)) ** 2, 0) / (v.length - 1) / v.length);
  return { nll: mean(nll), nllSe: se(nll), accuracy: mean(right), accuracySe: se(right) };
}

function withLabels(examples: { request: any; answer: string }[], label: (i: number) => string) {
  return examples.map((e, i) => ({ ...e, answer: label(i) }));
}

async function keyword(s: Server) {
  console.log('\n## 1. Keyword task (tiny-qwen3, 12 options, n = 240, the keyword among L filler words)\n');
  console.log('| L | readout (CV) acc / NLL | calibrated (CV) | head (CV) | applied | held-out 240 without the task | held-out 240 with it | held-out vs CV accuracy | fit |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const filler of [0, 4, 12]) {
    const reg = await s.post('/v1/tasks', { id: 'keyword', examples: keywordExamples(240, 0, codeWords, filler) });
    const m = reg.body.record.metrics;
    const fresh = keywordExamples(240, 10_000, codeWords, filler);
    const tasked = await heldOut(s, fresh);
    await s.delete('/v1/tasks/keyword');
    const base = await heldOut(s, fresh);
    const cvSe = Math.sqrt((m.applied.accuracy * (1 - m.applied.accuracy)) / 240);
    const z = Math.abs(tasked.accuracy - m.applied.accuracy) / Math.sqrt(tasked.accuracySe ** 2 + cvSe ** 2 || 1e-12);
    const pair = (x: { accuracy: number; nll: number }) => `${f(x.accuracy)} / ${f(x.nll)}`;
    console.log(
      `| ${filler} | ${pair(m.baseline)} | ${pair(m.calibration)} | ${m.head ? pair(m.head) : '-'} | ${reg.body.applied} | ${f(base.accuracy)} ± ${f(base.accuracySe)} / ${f(base.nll)} | ` +
        `${f(tasked.accuracy)} ± ${f(tasked.accuracySe)} / ${f(tasked.nll)} ± ${f(tasked.nllSe)} | ${f(z, 2)} SE apart | ${f(reg.body.record.fit_ms / 1000, 1)} s |`,
    );
  }
}

async function prior(s: Server) {
  const four = await s.post('/v1/tasks', { id: 'prior', examples: priorExamples(200) });
  const u = uniformStream(99);
  const skewed = withLabels(keywordExamples(240, 20_000), () => (u() < 0.6 ? 'alpha' : codeWords[1 + Math.floor(u() * 11)]));
  const twelve = await s.post('/v1/tasks', { id: 'prior12', examples: skewed });
  console.log('\n## 2. Class prior (labels independent of the text)\n');
  console.log('| task | applied | calibration | head | OOF NLL baseline → applied |\n|---|---|---|---|---|');
  for (const [name, r] of [['4 options, 70/10/10/10, n = 200', four], ['12 options, 60% one, n = 240', twelve]] as const) {
    const rec = r.body.record;
    console.log(`| ${name} | ${r.body.applied} | ${rec.calibration.applied ? `kept (ΔNLL ${f(rec.calibration.evidence.gain)}, t ${f(rec.calibration.evidence.t, 1)})` : rec.calibration.reason} | ${rec.head.applied ? 'kept' : rec.head.reason} | ${f(rec.metrics.baseline.nll)} → ${f(rec.metrics.applied.nll)} |`);
  }
  await s.delete('/v1/tasks/prior');
  await s.delete('/v1/tasks/prior12');
}

async function nullTasks(s: Server) {
  let heads = 0, badCalibrations = 0, calibrations = 0;
  const rows: string[] = [];
  for (let seed = 0; seed < 20; seed++) {
    const u = uniformStream(500 + seed);
    const random = () => codeWords[Math.floor(u() * 12)];
    const r = await s.post('/v1/tasks', { id: `null-${seed}`, examples: withLabels(keywordExamples(120, 30_000 + 1000 * seed), random) });
    const rec = r.body.record;
    heads += rec.head.applied ? 1 : 0;
    let verdict = '';
    if (rec.calibration.applied && !rec.head.applied) {
      calibrations++;
      const fresh = withLabels(keywordExamples(120, 60_000 + 1000 * seed), random);
      const tasked = await heldOut(s, fresh);
      await s.delete(`/v1/tasks/null-${seed}`);
      const base = await heldOut(s, fresh);
      const worse = tasked.nll >= base.nll;
      badCalibrations += worse ? 1 : 0;
      verdict = `held-out NLL ${f(base.nll)} → ${f(tasked.nll)}${worse ? ' (worse: wrongly kept)' : ''}`;
    } else await s.delete(`/v1/tasks/null-${seed}`);
    rows.push(`| ${seed} | ${r.body.applied} | ${rec.head.applied ? 'KEPT' : rec.head.reason.slice(0, 60)} | ${verdict} |`);
  }
  console.log('\n## 3. Null tasks (random labels, 12 options, n = 120, 20 seeds)\n');
  console.log('| seed | applied | head | calibration on fresh data |\n|---|---|---|---|');
  rows.forEach((r) => console.log(r));
  console.log(`\nHeads kept: ${heads} of 20 (each wrong). Calibrations kept: ${calibrations}, of which worse than the baseline on fresh data: ${badCalibrations}. Wrongly kept parts: ${heads + badCalibrations} of 20 tasks.`);
}

async function fittingTime() {
  const s = await server(['--base', 'tiny-qwen3', '--head-engine', 'bench-llama', '--layout', 'question-first']);
  try {
    const keys = Array.from({ length: 77 }, (_, i) => `intent${String(i).padStart(2, '0')}`);
    const question = { type: 'choice', instructions: 'Which intent does the message name?', criteria: Object.fromEntries(keys.map((k) => [k, null])) };
    const examples = Array.from({ length: 1000 }, (_, i) => ({ request: { state: `Message ${i}: please route ${keys[i % 77]} now.`, questions: { q: question } }, answer: keys[i % 77] }));
    const probe = { state: 'Is the sky blue today?', questions: { n: { type: 'noul' } } };
    const idle: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      await s.post('/v1/systemone', probe);
      idle.push(performance.now() - t);
    }
    let done = false;
    const t0 = performance.now();
    // Through node:http, which has no response timeout (fetch gives up on headers after 300 s).
    const registration = rawRequest(s.url, 'POST', '/v1/tasks', JSON.stringify({ id: 'intents', examples }), { 'content-type': 'application/json' })
      .then((r) => ({ status: r.status, body: JSON.parse(r.body) }))
      .finally(() => (done = true));
    const during: number[] = [];
    while (!done) {
      const t = performance.now();
      await s.post('/v1/systemone', probe);
      during.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await registration;
    const total = performance.now() - t0;
    const q = (v: number[], p: number) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor(p * v.length))];
    const rec = r.body.record;
    console.log('\n## 4. Fitting time: 1,000 examples, 77 options, hidden size 896 (bench-llama as --head-engine)\n');
    console.log(`Registration ${f(total / 1000, 1)} s: examples read in ${f(rec.read_ms / 1000, 1)} s, fitted in ${f(rec.fit_ms / 1000, 1)} s (worker thread). Applied: ${r.body.applied}; head ${rec.head.applied ? 'kept' : rec.head.reason}, OOF accuracy ${f(rec.metrics.head?.accuracy ?? NaN)}.`);
    console.log(`Main route (one noul question) during it: ${during.length} requests, median ${f(q(during, 0.5), 0)} ms, p90 ${f(q(during, 0.9), 0)} ms, max ${f(Math.max(...during), 0)} ms; idle before: median ${f(q(idle, 0.5), 0)} ms.`);
  } finally {
    await s.stop();
  }
}

async function main() {
  console.log(`# Tasks benchmark (${new Date().toISOString().slice(0, 10)})`);
  const s = await server(['--base', 'tiny-qwen3']);
  try {
    if (!skip.has(1)) await keyword(s);
    if (!skip.has(2)) await prior(s);
    if (!skip.has(3)) await nullTasks(s);
  } finally {
    await s.stop();
  }
  if (!skip.has(4)) await fittingTime();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
