/**
 * Soak benchmark (not a test): `npm run bench:soak`.
 * Starts the real server and drives it with SOAK_CLIENTS clients (default 8)
 * for SOAK_MINUTES (default 10) of valid, varied requests, half to /v1/answer
 * and half to /v1/systemone: states from a pool (the prefix cache hits), fresh
 * states (it fills and evicts under --cache-mib 8), one to four questions of
 * each kind (choices with and without descriptions), and now and then a long
 * state (a large request whose memory must be returned). Every 30 s it prints
 * requests/s, p50/p99 latency and the resident memory of the server and engine
 * processes (from /health); at the end, the growth between minute 2 and the
 * end, and per route the largest difference between repeats of identical
 * requests (the same body always gets the same logits: this must print 0).
 *
 * It does so at each kernel level in SOAK_LEVELS (default: every level this
 * CPU runs, best first; the server's TQ_KERNELS), and ends with the largest
 * difference per level and route. SOAK_BASE (default tiny-qwen3), SOAK_DTYPE
 * (default bf16) and SOAK_ARGS (extra server flags, e.g. "--batch-invariant
 * off") choose the server.
 */
import { createHash } from 'crypto';
import { uniformStream } from '../src/common/prng';
import { runnableIsaLevels } from '../test/helpers/cpu';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';

const CLIENTS = Number(process.env.SOAK_CLIENTS ?? 8);
const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const BASE = process.env.SOAK_BASE ?? 'tiny-qwen3';
const DTYPE = process.env.SOAK_DTYPE ?? 'bf16';
const EXTRA = (process.env.SOAK_ARGS ?? '').split(' ').filter(Boolean);
const LEVELS = process.env.SOAK_LEVELS ? process.env.SOAK_LEVELS.split(',') : runnableIsaLevels();
const REPORT_S = 30;

const words = ('invoice refund shipping delay customer order account payment warehouse courier parcel damaged replacement ' +
  'manager weekend address receipt discount subscription cancel upgrade support ticket answer evening morning').split(' ');

function sentence(rnd: () => number, n: number): string {
  return Array.from({ length: n }, () => words[Math.floor(rnd() * words.length)]).join(' ') + '.';
}

const rnd = uniformStream(20261123);
const pool = Array.from({ length: 24 }, (_, i) => sentence(rnd, 20 + ((i * 37) % 300)));
const questionPool = [
  { kind: 'noul', instructions: 'Was the invoice paid twice?' },
  { kind: 'noul', instructions: 'Is the customer asking for a refund?' },
  { kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] },
  { kind: 'choice', instructions: 'Which team should handle this?', options: ['billing', 'shipping', 'support', 'sales', 'legal'] },
  { kind: 'choice', instructions: 'What should we send?', options: ['refund', 'replacement', 'apology', 'nothing'], descriptions: ['money back', 'a new parcel', null, null] },
  { kind: 'score', instructions: 'How upset is the customer?', options: ['calm', 'annoyed', 'angry'] },
  { kind: 'score', instructions: 'How urgent is it?', options: ['low', 'medium', 'high', 'critical'] },
];
type PoolQuestion = (typeof questionPool)[number];

/** The same question in System One's form: a key per question, choice criteria as descriptions by option. */
function systemOneQuestion(q: PoolQuestion): unknown {
  if (q.kind === 'noul') return { type: 'noul', instructions: q.instructions };
  if (q.kind === 'score') return { type: 'score', instructions: q.instructions, criteria: q.options };
  return { type: 'choice', instructions: q.instructions, criteria: Object.fromEntries(q.options!.map((o, i) => [o, q.descriptions?.[i] ?? null])) };
}

type Route = '/v1/answer' | '/v1/systemone';

/** A request body: pool states repeat (cache hits, and repeats to compare), fresh ones fill the cache. */
function nextBody(r: () => number): { route: Route; body: string; repeatable: boolean } {
  const u = r();
  let state: string;
  let repeatable = true;
  if (u < 0.02) {
    state = sentence(r, 6000);  // a large request, ~6k words
    repeatable = false;
  } else if (u < 0.3) {
    state = sentence(r, 10 + Math.floor(r() * 400));
    repeatable = false;
  } else state = pool[Math.floor(r() * pool.length)];
  const n = 1 + Math.floor(r() * 4);
  const start = Math.floor(r() * questionPool.length);
  const questions = Array.from({ length: n }, (_, i) => questionPool[(start + i) % questionPool.length]);
  if (r() < 0.5) {
    const answerQuestions = questions.map(({ descriptions, ...q }) => (descriptions ? { ...q, options: q.options!.map((o, i) => (descriptions[i] ? `${o}: ${descriptions[i]}` : o)) } : q));
    return { route: '/v1/answer', body: JSON.stringify({ state, questions: answerQuestions }), repeatable };
  }
  return { route: '/v1/systemone', body: JSON.stringify({ state, questions: Object.fromEntries(questions.map((q, i) => [`q${i}`, systemOneQuestion(q)])) }), repeatable };
}

/** Every probability of a response, in a fixed order. */
function probabilities(route: Route, json: any): number[] {
  if (route === '/v1/answer') return json.answers.flatMap((a: any) => a.probabilities);
  return Object.keys(json.answers).sort().flatMap((k) => {
    const a = json.answers[k];
    return a.type === 'noul' ? [a.noul] : Object.values(a.probabilities as Record<string, number>);
  });
}

const percentile = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] : NaN);
const mib = (b: number) => (b / 2 ** 20).toFixed(0);

interface RouteRepeats {
  repeats: number;
  maxDelta: number;
}

/** One soak at one kernel level; the repeats compared and their largest difference, per route. */
async function soak(level: string): Promise<Record<Route, RouteRepeats>> {
  const args = ['--port', '0', '--base', BASE, '--dtype', DTYPE, '--cache-mib', '8', ...EXTRA];
  const { child, output, exited } = runServerProcess(args, { TQ_KERNELS: level });
  const url = await listeningUrl(output, exited);
  const health = async () => (await (await fetch(url + '/health')).json()) as any;
  const h0 = await health();
  console.log(`# tqserve soak: ${CLIENTS} clients x ${MINUTES} min, ${BASE} ${h0.dtype}, kernels ${h0.kernels}, batch_invariant ${h0.batch_invariant}, --cache-mib 8 ${EXTRA.join(' ')}\n`);
  console.log('| time | requests/s | p50 ms | p99 ms | server RSS MiB (JS heap) | engine RSS MiB (JS heap) | attention buffers MiB | oneDNN primitives | cache evicted blocks |');
  console.log('|---|---|---|---|---|---|---|---|---|');

  const seen = new Map<string, number[]>();  // body hash -> probabilities of its first answer
  const routes: Record<Route, RouteRepeats> = { '/v1/answer': { repeats: 0, maxDelta: 0 }, '/v1/systemone': { repeats: 0, maxDelta: 0 } };
  let failures = 0;
  let latencies: number[] = [];
  const end = Date.now() + MINUTES * 60_000;
  const clients = Array.from({ length: CLIENTS }, async (_, c) => {
    const r = uniformStream(1000 + c);
    while (Date.now() < end) {
      const { route, body, repeatable } = nextBody(r);
      const t0 = performance.now();
      const res = await fetch(url + route, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const json = (await res.json()) as any;
      latencies.push(performance.now() - t0);
      if (res.status !== 200) {
        failures++;
        continue;
      }
      if (!repeatable) continue;
      const probs = probabilities(route, json);
      const key = createHash('sha256').update(route + body).digest('hex');
      const first = seen.get(key);
      if (!first) seen.set(key, probs);
      else {
        const stats = routes[route];
        stats.repeats++;
        probs.forEach((p, i) => (stats.maxDelta = Math.max(stats.maxDelta, Math.abs(p - first[i]))));
      }
    }
  });

  const samples: { t: number; server: number; engine: number }[] = [];
  const started = Date.now();
  let stopping = false;
  const reporter = setInterval(async () => {
    const h = await health().catch((e) => (stopping ? undefined : Promise.reject(e)));
    if (!h || stopping) return;
    const t = Math.round((Date.now() - started) / 1000);
    const m = h.memory;
    samples.push({ t, server: m.server_rss_bytes, engine: m.engine_rss_bytes });
    console.log(`| ${t} s | ${(latencies.length / REPORT_S).toFixed(1)} | ${percentile(latencies, 0.5).toFixed(0)} | ${percentile(latencies, 0.99).toFixed(0)} | ` +
      `${mib(m.server_rss_bytes)} (${mib(m.server_js_heap_bytes)}) | ${mib(m.engine_rss_bytes)} (${mib(m.engine_js_heap_bytes)}) | ${mib(m.attention_buffer_bytes)} | ${m.onednn_primitives.cached} | ${h.cache.blocks.evicted} |`);
    latencies = [];
  }, REPORT_S * 1000);
  await Promise.all(clients);
  stopping = true;
  clearInterval(reporter);
  child.kill('SIGTERM');
  await exited;

  // Growth from the first sample at or after minute 2 to the last (the criterion: <= 5%).
  const from = samples.find((s) => s.t >= 120) ?? samples[0];
  const last = samples[samples.length - 1];
  if (from && last) {
    const growth = (a: number, b: number) => `${mib(a)} -> ${mib(b)} MiB (${(((b - a) / a) * 100).toFixed(1)}%)`;
    console.log(`\nRSS from ${from.t} s to ${last.t} s: server ${growth(from.server, last.server)}, engine ${growth(from.engine, last.engine)}`);
    // Single samples move with the request mix (a long state in flight); the peaks of the minutes
    // after minute 2 against those of the last two minutes show whether the level still rises.
    const peak = (xs: typeof samples, k: 'server' | 'engine') => Math.max(...xs.map((x) => x[k]));
    const early = samples.filter((x) => x.t >= 120 && x.t <= 240), late = samples.filter((x) => x.t > last.t - 120);
    if (early.length && late.length && late[0].t > 240)
      console.log(`RSS peak, minutes 2-4 vs the last 2 minutes: server ${growth(peak(early, 'server'), peak(late, 'server'))}, ` +
        `engine ${growth(peak(early, 'engine'), peak(late, 'engine'))}`);
  }
  for (const [route, r] of Object.entries(routes)) console.log(`${route}: identical requests repeated: ${r.repeats}; max |Δp| between repeats: ${r.maxDelta}`);
  console.log(`failed requests: ${failures}\n`);
  return routes;
}

async function main() {
  const results: [string, Record<Route, RouteRepeats>][] = [];
  for (const level of LEVELS) results.push([level, await soak(level)]);
  console.log('| kernel level | route | identical requests repeated | max \\|Δp\\| between repeats |');
  console.log('|---|---|---|---|');
  for (const [level, routes] of results)
    for (const [route, r] of Object.entries(routes)) console.log(`| ${level} | ${route} | ${r.repeats} | ${r.maxDelta} |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
