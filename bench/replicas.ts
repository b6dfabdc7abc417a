/**
 * Replica benchmark (not a test): `npm run bench:replicas`. Two tqserve replicas (bench-llama, bf16,
 * one thread each: this machine's two cores) behind Debian's nginx with deploy/nginx/tqserve.conf,
 * in one run: 16 states of about 1,000 tokens, each asked 4 different questions by 4 concurrent
 * clients, routed (a) by the recipe's X-State-Key consistent hash, and (b) without the header, as
 * a balancer that ignores the state spreads them (nginx on its random $request_id). Reports the
 * share of prompt tokens served from the replicas' prefix caches (their /metrics), the wall time and
 * the latencies, and the ratio of (b) to (a). Each arm asks its own states, so both start cold.
 *
 * Then the same workload against one server: (c) `--engines 2` (one thread each), the clients sending no key (the
 * server routes by the state's first tokens), and (d) one engine with both threads: what (c)'s routing should keep
 * of one engine's cache hits (the goal: at least 95% of its share). BENCH_ARMS=engines runs (c) and (d) alone.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { generateTestModel } from '../src/testmodels/generate';
import { NGINX, startNginx } from '../test/helpers/nginx';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { dossier, quantile, topicQuestion } from './workload';

const STATES = Number(process.env.BENCH_STATES ?? 16);
const QUESTIONS = 4;
const CLIENTS = 4;

async function cachedAndComputed(urls: string[]) {
  let cached = 0, computed = 0;
  for (const url of urls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const m of text.matchAll(/^tqserve_prompt_tokens_total\{service_route="text",source="(cached|computed)"\} (\d+)/gm)) {
      if (m[1] === 'cached') cached += Number(m[2]);
      else computed += Number(m[2]);
    }
  }
  return { cached, computed };
}

/** Every (state, question) once, question-major (each state's first question comes before any second one), by CLIENTS clients. */
async function arm(front: string, replicas: string[], name: string, keyed: boolean) {
  const jobs: [number, number][] = [];
  for (let q = 0; q < QUESTIONS; q++) for (let s = 0; s < STATES; s++) jobs.push([s, q]);
  const before = await cachedAndComputed(replicas);
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      for (let job = jobs.shift(); job; job = jobs.shift()) {
        const [s, q] = job;
        const t = performance.now();
        const res = await fetch(`${front}/v1/systemone`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(keyed ? { 'x-state-key': `${name}-${s}` } : {}) },
          body: JSON.stringify({ state: dossier(`${name}-${s}`), questions: { q: topicQuestion(q) } }),
        });
        if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
        await res.json();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const wallS = (performance.now() - t0) / 1000;
  const after = await cachedAndComputed(replicas);
  const cached = after.cached - before.cached, computed = after.computed - before.computed;
  return { name, wallS, cachedShare: cached / (cached + computed), computedTokens: computed, p50: quantile(latencies, 0.5), p90: quantile(latencies, 0.9) };
}

const row = (label: string, r: Awaited<ReturnType<typeof arm>>) =>
  `| ${label} | ${(100 * r.cachedShare).toFixed(1)}% | ${r.computedTokens} | ${r.wallS.toFixed(1)} s | ${r.p50.toFixed(0)} ms | ${r.p90.toFixed(0)} ms |`;
const HEADER = '| routing | prompt tokens from the prefix cache | tokens computed | wall | p50 | p90 |\n|---|---|---|---|---|---|';

/** One server: its engines, no key sent. */
async function oneServer(model: string, name: string, args: string[]) {
  const server = runServerProcess(['--base', model, '--dtype', 'bf16', '--port', '0', ...args]);
  try {
    const url = await listeningUrl(server.output, server.exited);
    await fetch(`${url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state: 'warm-up', questions: { q: topicQuestion(0) } }) });
    return await arm(url, [url], name, false);
  } finally {
    server.child.kill();
  }
}

async function engines(model: string) {
  const two = await oneServer(model, 'two-engines', ['--engines', '2']);
  const one = await oneServer(model, 'one-engine', ['--threads', '2']);
  console.log(`${STATES} states x ${QUESTIONS} questions, ${CLIENTS} clients, one server (bench-llama bf16), no X-State-Key`);
  console.log(HEADER);
  console.log(row('--engines 2 (1 thread each), routed by the state', two));
  console.log(row('one engine (2 threads)', one));
  console.log(`two engines' cache share / one engine's: ${(two.cachedShare / one.cachedShare).toFixed(3)}; wall ${(two.wallS / one.wallS).toFixed(2)}x`);
}

async function main() {
  if (process.env.BENCH_ARMS === 'engines') return engines(generateTestModel('bench-llama'));
  if (!fs.existsSync(NGINX)) throw new Error(`${NGINX} is missing: bash scripts/setup.sh installs Debian's nginx`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-bench-replicas-'));
  const model = generateTestModel('bench-llama');
  const replicas = [0, 1].map(() => runServerProcess(['--base', model, '--dtype', 'bf16', '--threads', '1', '--port', '0']));
  try {
    const urls = await Promise.all(replicas.map((r) => listeningUrl(r.output, r.exited)));
    const nginx = await startNginx(dir, urls.map((u) => Number(new URL(u).port)));
    try {
      // One request per replica first, so neither arm pays for warming the engines.
      for (const url of urls) await fetch(`${url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state: 'warm-up', questions: { q: topicQuestion(0) } }) });
      const keyed = await arm(nginx.url, urls, 'keyed', true);
      const spread = await arm(nginx.url, urls, 'spread', false);
      console.log(`${STATES} states x ${QUESTIONS} questions, ${CLIENTS} clients, 2 replicas (bench-llama bf16, 1 thread each) behind nginx`);
      console.log(HEADER);
      console.log(row('X-State-Key (the recipe)', keyed));
      console.log(row('no key (spread)', spread));
      console.log(`spread / keyed: tokens computed ${(spread.computedTokens / keyed.computedTokens).toFixed(2)}x, wall ${(spread.wallS / keyed.wallS).toFixed(2)}x, p50 ${(spread.p50 / keyed.p50).toFixed(2)}x`);
    } finally {
      nginx.process.kill('SIGQUIT');
    }
  } finally {
    for (const r of replicas) r.child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  await engines(model);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
