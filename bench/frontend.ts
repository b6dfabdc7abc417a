/**
 * The server's own work per request (issue 26), not a test: `npm run bench:frontend`. tiny-qwen3 (its
 * engine time is small, so the front end shows), one question per request, sent one at a time:
 * about the same ~4,900-character state again (cached by the engine's prefix cache), and about a new
 * state each time. Prints the medians of the client's time, the server's (`x-service-server-ms`), the
 * server's own part (that minus the engine and wait stages) and the stages (`x-service-stages`).
 */
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { dossier, median, quantile, topicQuestion } from './workload';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);

async function main() {
  const { child, output, exited } = runServerProcess(['--base', 'tiny-qwen3', '--port', '0']);
  const url = await listeningUrl(output, exited);
  while ((await fetch(url + '/ready')).status !== 200) await new Promise((r) => setTimeout(r, 50));
  const ask = async (state: string) => {
    const t0 = performance.now();
    const res = await fetch(url + '/v1/systemone', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state, questions: { q: topicQuestion(1) } }) });
    await res.json();
    const client = performance.now() - t0;
    const stages = Object.fromEntries(res.headers.get('x-service-stages')!.split(';').map((s) => s.split('=')).map(([k, v]) => [k, Number(v)]));
    const server = Number(res.headers.get('x-service-server-ms'));
    return { client, server, own: server - stages.engine - stages.wait, ...stages } as Record<string, number>;
  };
  for (let i = 0; i < 20; i++) await ask(dossier(1)); // warm-up: first-call allocations and JIT
  const scenarios: [string, (i: number) => string][] = [
    ['the same state again (cached)', () => dossier(1)],
    ['a new state each request', (i) => dossier(1000 + i)],
  ];
  const columns = ['client', 'server', 'own', 'prepare', 'engine', 'wait'];
  console.log(`# tqserve front end: tiny-qwen3, one question, ${dossier(1).length}-character state, ${REQUESTS} requests one at a time (ms; median, p90)\n`);
  console.log(`| request | ${columns.join(' | ')} |`);
  console.log(`|---|${columns.map(() => '---').join('|')}|`);
  for (const [name, state] of scenarios) {
    const rows: Record<string, number>[] = [];
    for (let i = 0; i < REQUESTS; i++) rows.push(await ask(state(i)));
    const cell = (k: string) => `${median(rows.map((r) => r[k])).toFixed(2)}, ${quantile(rows.map((r) => r[k]), 0.9).toFixed(2)}`;
    console.log(`| ${name} | ${columns.map(cell).join(' | ')} |`);
  }
  child.kill();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
