/**
 * Cache salts (issue 46), not a test: `npm run bench:cache-salt`. What a tenant could learn from the time
 * of an answer: the real server (bench-llama, bf16, 2 threads), one question per request over HTTP, one
 * request at a time, each round on a state never sent before (a ~1,000-token dossier):
 *
 *   cold         the state's first request (salt A);
 *   same salt    the same state again under salt A: served from the prefix cache;
 *   other salt   the same state under salt B, as another tenant probing for it would send it;
 *   unsalted     the same state without a salt.
 *
 * Prints the medians of the client's time and of the engine's `warm` stage (computing the state), and
 * the state tokens the prefix cache served. With salts kept apart, "other salt" and "unsalted" take as
 * long as "cold".
 */
import { generateTestModel } from '../src/testmodels/generate';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { dossier, median, topicQuestion } from './workload';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);

async function main() {
  const dir = generateTestModel('bench-llama');
  const { child, output, exited } = runServerProcess(['--base', dir, '--dtype', 'bf16', '--threads', '2', '--port', '0']);
  const url = await listeningUrl(output, exited);
  while ((await fetch(url + '/ready')).status !== 200) await new Promise((r) => setTimeout(r, 50));
  const ask = async (state: string, salt?: string) => {
    const t0 = performance.now();
    const res = await fetch(url + '/v1/answer', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(salt ? { 'x-cache-salt': salt } : {}) },
      body: JSON.stringify({ state, questions: [{ kind: 'choice', instructions: topicQuestion(1).instructions, options: Object.keys(topicQuestion(1).criteria) }] }),
    });
    const body = await res.json();
    if (res.status !== 200) throw new Error(JSON.stringify(body));
    return { client: performance.now() - t0, warm: body.timing.warm_ms as number, cached: body.timing.cached_tokens as number };
  };
  await ask(dossier('warm-up'), 'warm-up');
  const arms = ['cold', 'same salt', 'other salt', 'unsalted'] as const;
  const rows: Record<(typeof arms)[number], { client: number; warm: number; cached: number }[]> = { cold: [], 'same salt': [], 'other salt': [], unsalted: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const state = dossier(`salt-round-${round}`);
    rows.cold.push(await ask(state, `A${round}`));
    rows['same salt'].push(await ask(state, `A${round}`));
    rows['other salt'].push(await ask(state, `B${round}`));
    rows.unsalted.push(await ask(state));
  }
  child.kill();
  console.log(`# cache salts: bench-llama, bf16, 2 threads; ${ROUNDS} rounds, a new ${dossier(0).length}-character state each (medians)\n`);
  console.log('| request | client ms | engine warm ms | state tokens from the cache | / cold |');
  console.log('|---|---|---|---|---|');
  const cold = median(rows.cold.map((r) => r.client));
  for (const arm of arms) {
    const r = rows[arm];
    const client = median(r.map((x) => x.client));
    console.log(`| ${arm} | ${client.toFixed(1)} | ${median(r.map((x) => x.warm)).toFixed(1)} | ${median(r.map((x) => x.cached))} | ${(client / cold).toFixed(2)} |`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
