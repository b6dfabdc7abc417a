/**
 * The server's own work per request (issues 26, 44), not a test: `npm run bench:frontend`. tiny-qwen3
 * (its engine time is small, so the front end shows), one question per request, sent one at a time:
 * about the same ~4,900-character state again (cached by the engine's prefix cache), and about a new
 * state each time. Prints the medians of the client's time, the server's (`x-service-server-ms`), the
 * server's own part (that less the engine and wait stages), the engine-process hop within it (the `hop`
 * stage), the server's code (own less hop), the client's time outside the server (`outside`: its time less
 * `x-service-server-ms`: the HTTP exchange, and whatever the server does after stamping it), its time less the engine's
 * stages (`beyond`: all but the engine's variance, which hides small changes in the client's time) and the other stages
 * (`x-service-stages`), and the server process's CPU time per request (`cpu`: all its threads, from /proc). Each server
 * is measured just after its start (its first requests, while V8 still compiles the request path), then after
 * BENCH_WARMUP more requests (default 3,000) in its steady state, as a server that has run a while is.
 * FRONTEND_BASELINE (another checkout's dist/tqserve.js) runs beside this build, taking turns in
 * both orders, FRONTEND_ROUNDS times (default 6; 1 without a baseline), and the medians of each build's rounds follow.
 * Then, on the same server, BENCH_LOAD_CLIENTS (default 32) clients at once for BENCH_LOAD_SECONDS (10), each asking a new
 * question about the cached state (0 clients: none): requests/s and the server's CPU per request, its main thread's
 * apart (/proc): on a GPU, whose engine outruns the front end, that thread bounds the load (the window's serve step);
 * then the same load on a bare Koa server, and on one that also calls a child process over IPC for each request: the floor.
 * Each arm is a server with other flags: by default the channel to the engine process slept on between messages
 * (`--busy-poll-ms 0`, the CPU's default), and spun on (`--busy-poll-ms 20`, a GPU's default) with one
 * engine thread, so that the spinning has a core of its own on a small machine; BENCH_ARMS picks (`sleep`,
 * `spin`). Then the machine's floor for the hop: two bare Node processes passing a call of the same size
 * and a reply, over the IPC pipe alone and over the channel, sleeping and spinning, each idle for as long
 * as in the server (the engine computing, then the front end and the client).
 */
import { execFileSync, spawn } from 'child_process';
import { closeSync, readFileSync } from 'fs';
import { Agent, request } from 'http';
import * as path from 'path';
import { hostAddon } from '../src/common/host-addon';
import { ChannelEndpoint, ChannelWire, channelRings, RING_BYTES } from '../src/server/engine-process/channel';
import { listeningUrl, runServerProcess } from '../test/helpers/server-process';
import { dossier, median, quantile, serviceStages, topicQuestion } from './workload';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
/** Requests between the just-started scenario and the steady ones: V8 compiles a request's path over the first thousands (bench/README.md, "Front end"). */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3000);
/** The steady cached scenario's name: the one compared across builds and rounds. */
const STEADY_CACHED = 'the same state again (cached)';
const LOAD_CLIENTS = Number(process.env.BENCH_LOAD_CLIENTS ?? 32);
const LOAD_SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 10);
const BASELINE = process.env.FRONTEND_BASELINE;
const ROUNDS = Number(process.env.FRONTEND_ROUNDS ?? (BASELINE ? 6 : 1));
const root = path.resolve(__dirname, '..');
const BUILDS: Record<string, string> = { this: path.join(root, 'dist', 'tqserve.js'), ...(BASELINE ? { baseline: BASELINE } : {}) };

type Row = Record<string, number>;

const ARMS: Record<string, string[]> = { sleep: ['--busy-poll-ms', '0'], spin: ['--busy-poll-ms', '20', '--threads', '1'] };

async function serverRows(flags: string[], command: string): Promise<{ scenarios: { name: string; rows: Row[] }[]; load?: LoadRow }> {
  const { child, output, exited } = runServerProcess(['--base', 'tiny-qwen3', '--port', '0', ...flags], {}, command);
  const url = await listeningUrl(output, exited);
  while ((await fetch(url + '/ready')).status !== 200) await new Promise((r) => setTimeout(r, 50));
  const ask = async (state: string): Promise<Row> => {
    const t0 = performance.now();
    const res = await fetch(url + '/v1/systemone', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state, questions: { q: topicQuestion(1) } }) });
    await res.json();
    const client = performance.now() - t0;
    const stages = serviceStages(res.headers.get('x-service-stages')!);
    const server = Number(res.headers.get('x-service-server-ms'));
    const own = server - stages.engine - stages.wait;
    return { client, server, own, code: own - stages.hop, outside: client - server, beyond: client - stages.engine - stages.wait, ...stages };
  };
  const scenario = async (name: string, state: (i: number) => string) => {
    const rows: Row[] = [];
    const cpu0 = cpuMs(child.pid!);
    for (let i = 0; i < REQUESTS; i++) rows.push(await ask(state(i)));
    const cpu = (cpuMs(child.pid!) - cpu0) / REQUESTS;
    return { name, rows: rows.map((r) => ({ ...r, cpu })) };
  };
  for (let i = 0; i < 20; i++) await ask(dossier(1)); // first-call allocations
  const out = [await scenario('the same state again, just started', () => dossier(1))];
  for (let i = 0; i < WARMUP; i++) await ask(dossier(1));
  out.push(await scenario(STEADY_CACHED, () => dossier(1)));
  out.push(await scenario('a new state each request', (i) => dossier(1000 + i)));
  const load = LOAD_CLIENTS > 0 ? await underLoad(url, child.pid!) : undefined;
  child.kill();
  return { scenarios: out, load };
}

type LoadRow = { requests: number; perSecond: number; cpu: number; mainCpu: number };

/**
 * LOAD_CLIENTS clients asking new questions about the cached state (dossier 1) for LOAD_SECONDS, over kept-alive
 * connections (node:http: fetch's own cost a request is the client's, on the same cores). Each question's text is new,
 * so no two requests join one computation in flight.
 */
async function underLoad(url: string, pid: number): Promise<LoadRow> {
  const agent = new Agent({ keepAlive: true, maxSockets: LOAD_CLIENTS });
  let asked = 0;
  const ask = () => new Promise<void>((resolve, reject) => {
    const body = JSON.stringify({ state: dossier(1), questions: { q: topicQuestion(asked++) } });
    const req = request(url + '/v1/systemone', { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`under load: status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
  const run = async (ms: number) => {
    const until = performance.now() + ms;
    let answered = 0;
    await Promise.all(Array.from({ length: LOAD_CLIENTS }, async () => {
      for (; performance.now() < until; answered++) await ask();
    }));
    return answered;
  };
  await run(2000); // the load's own first requests: connections opened, its batches' shapes met
  const [cpu0, main0, t0] = [cpuMs(pid), cpuMs(pid, pid), performance.now()];
  const requests = await run(LOAD_SECONDS * 1000);
  const [cpu1, main1, t1] = [cpuMs(pid), cpuMs(pid, pid), performance.now()];
  agent.destroy();
  return { requests, perSecond: (requests * 1000) / (t1 - t0), cpu: (cpu1 - cpu0) / requests, mainCpu: (main1 - main0) / requests };
}

/**
 * The load's floor: a bare Koa server with this project's packages, which reads each request's JSON body and answers a
 * small JSON body; argv[1] 'hop': with a call of a state's size to a child process and back over the IPC pipe (advanced
 * serialization) for each request, as the server's engine process is called. Prints its URL as the server does.
 */
const BARE_SERVER = `
const Koa = require('koa'); const Router = require('@koa/router'); const getRawBody = require('raw-body'); const { spawn } = require('child_process');
const hop = process.argv[1] === 'hop' && spawn(process.execPath, ['-e', "process.on('message', (m) => process.send({ id: m.id, logits: new Float32Array(4) }))"],
  { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
const waiting = new Map(); let next = 0;
if (hop) hop.on('message', (m) => { waiting.get(m.id)(m); waiting.delete(m.id); });
const state = Int32Array.from({ length: 1265 }, (_, i) => (i * 7919) % 150000);
const call = () => new Promise((resolve) => { const id = next++; waiting.set(id, resolve);
  hop.send({ kind: 'answer', id, call: { state: Int32Array.from(state), questions: [{ tokens: Int32Array.from({ length: 40 }, (_, i) => i), labelIds: Int32Array.from([1, 2, 3, 4]) }] } }); });
const app = new Koa(); const router = new Router();
router.post('/v1/systemone', async (ctx) => {
  const body = JSON.parse((await getRawBody(ctx.req, { limit: '10mb' })).toString('utf8'));
  const logits = hop ? (await call()).logits : new Float32Array(4);
  ctx.type = 'application/json';
  ctx.body = JSON.stringify({ model: 'bare', answers: { q: { type: 'choice', choice: { costs: logits[0] + body.state.length % 2 } } } });
});
app.use(router.routes());
const server = app.listen(0, '127.0.0.1', () => console.log('on http://127.0.0.1:' + server.address().port));
process.on('SIGTERM', () => process.exit(0));`;

async function bareUnderLoad(kind: 'bare' | 'hop'): Promise<LoadRow> {
  const child = spawn(process.execPath, ['-e', BARE_SERVER, kind], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    return await underLoad(await listeningUrl(() => out, exited), child.pid!);
  } finally {
    child.kill();
  }
}

/** The kernel's clock ticks a second, in which /proc counts CPU time (10 ms each on most: read over many requests). */
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100;

/** A process's CPU time so far in ms, all its threads or one (Linux's /proc: utime and stime). */
function cpuMs(pid: number, thread?: number): number {
  const fields = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/** The echo side of the floor: holds each call `hold` ms (idle, as the engine process's main thread is while its engine thread computes), then replies. */
const ECHO = `const reply = (m, send) => { const t = performance.now(); setTimeout(() => send({ answers: [{ labelLogits: new Float32Array(m.labels) }], heldMs: performance.now() - t }), m.hold); };`;
const PIPE_ECHO = `${ECHO} process.on('message', (m) => reply(m, (r) => process.send(r)));`;
/** The same over the server's channel (dist/, as the server runs it), spinning argv[1] ms after a message and while it holds a call. */
const CHANNEL_ECHO = `${ECHO}
const { closeSync } = require('fs');
const { hostAddon } = require(${JSON.stringify(path.join(root, 'dist/common/host-addon.js'))});
const { ChannelEndpoint, channelRings, RING_BYTES } = require(${JSON.stringify(path.join(root, 'dist/server/engine-process/channel.js'))});
const buffer = hostAddon().mapSharedMemory(4, 2 * RING_BYTES);
closeSync(4);
let holding = false;
const echo = new ChannelEndpoint(channelRings(buffer, 'engine'), (w) => process.send(w), (m) => { holding = true; reply(m, (r) => { holding = false; echo.send(r); }); }, { busyPollMs: Number(process.argv[1]), busy: () => holding });
process.on('message', (w) => echo.receive(w));
process.on('disconnect', () => process.exit(0));`;

/** Asks the echo one call and waits for its reply. */
type Link = { ask(call: object): Promise<{ heldMs: number }>; close(): void };

function pipeLink(): Link {
  const echo = spawn(process.execPath, ['-e', PIPE_ECHO], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
  return {
    ask: (call) => new Promise((resolve) => {
      echo.once('message', resolve);
      echo.send(call);
    }),
    close: () => echo.kill(),
  };
}

function channelLink(busyPollMs: number): Link {
  const shared = hostAddon()!.createSharedMemory(2 * RING_BYTES);
  const echo = spawn(process.execPath, ['-e', CHANNEL_ECHO, String(busyPollMs)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc', shared.fd], serialization: 'advanced' });
  closeSync(shared.fd);
  let waiting: ((r: { heldMs: number }) => void) | undefined;
  const us = new ChannelEndpoint<object, { heldMs: number }>(channelRings(shared.buffer, 'server'), (w) => echo.send(w), (r) => waiting!(r), { busyPollMs, busy: () => waiting !== undefined });
  echo.on('message', (w: ChannelWire<{ heldMs: number }>) => us.receive(w));
  return {
    ask: (call) => new Promise((resolve) => {
      waiting = (r) => {
        waiting = undefined;
        resolve(r);
      };
      us.send(call);
    }),
    close: () => echo.kill(),
  };
}

/** Two hops between bare Node processes: round trip less the echo's hold, median. */
async function hopFloor(link: Link, stateTokens: number, holdMs: number, gapMs: number): Promise<number> {
  const call = { state: Int32Array.from({ length: stateTokens }, (_, i) => (i * 7919) % 150000), questions: [{ tokens: Int32Array.from({ length: 60 }, (_, i) => i), labelIds: Int32Array.from([1, 2, 3, 4]) }], labels: 4, hold: holdMs };
  const hops: number[] = [];
  for (let i = 0; i < REQUESTS + 20; i++) {
    const t0 = performance.now();
    const reply = await link.ask(call);
    if (i >= 20) hops.push(performance.now() - t0 - reply.heldMs);
    await new Promise((r) => setTimeout(r, gapMs));
  }
  link.close();
  return median(hops);
}

async function main() {
  const arms = (process.env.BENCH_ARMS ?? 'sleep,spin').split(',');
  const columns = ['client', 'server', 'own', 'hop', 'code', 'outside', 'beyond', 'prepare', 'engine', 'wait'];
  const cell = (rows: Row[], k: string) => `${median(rows.map((r) => r[k])).toFixed(2)}, ${quantile(rows.map((r) => r[k]), 0.9).toFixed(2)}`;
  console.log(`# tqserve front end: tiny-qwen3, one question, ${dossier(1).length}-character state, ${REQUESTS} requests one at a time, the steady ones after ${WARMUP} more (ms; median, p90; cpu: the server process's CPU per request)\n`);
  console.log(`| build | server flags | request | ${columns.join(' | ')} | cpu |`);
  console.log(`|---|---|---|${columns.map(() => '---').join('|')}|---|`);
  let cached: Row[] = [];
  const loads: string[] = [];
  // Each build's cached-state medians, per arm, one a round: the builds compared where the rounds' noise allows.
  const rounds: Record<string, Record<string, Row[]>> = {};
  for (const arm of arms) {
    if (!ARMS[arm]) throw new Error(`BENCH_ARMS: no arm ${arm} (${Object.keys(ARMS).join(', ')})`);
    rounds[arm] = Object.fromEntries(Object.keys(BUILDS).map((b) => [b, []]));
    for (let round = 0; round < ROUNDS; round++)
      // Taking turns in both orders (this first, then the baseline first): a machine that speeds up or slows down over
      // the run favours neither.
      for (const [build, command] of round % 2 ? Object.entries(BUILDS).reverse() : Object.entries(BUILDS)) {
        const { scenarios: results, load } = await serverRows(ARMS[arm], command);
        if (load) loads.push(`| ${build} | \`${ARMS[arm].join(' ')}\` | ${load.requests} | ${load.perSecond.toFixed(0)} | ${load.cpu.toFixed(3)} | ${load.mainCpu.toFixed(3)} |`);
        for (const { name, rows } of results) console.log(`| ${build} | \`${ARMS[arm].join(' ')}\` | ${name} | ${columns.map((k) => cell(rows, k)).join(' | ')} | ${rows[0].cpu.toFixed(2)} |`);
        const steady = results.find((r) => r.name === STEADY_CACHED)!.rows;
        rounds[arm][build].push(Object.fromEntries([...columns, 'cpu'].map((k) => [k, median(steady.map((r) => r[k]))])));
        if (build === 'this') cached = steady;
      }
  }
  if (ROUNDS > 1) {
    console.log(`\nA cached state (steady), each build's medians over its ${ROUNDS} rounds (each round's median in brackets), ms:\n`);
    for (const [arm, builds] of Object.entries(rounds))
      for (const [build, rows] of Object.entries(builds))
        console.log(`- ${build}, \`${ARMS[arm].join(' ')}\`: ` + ['client', 'own', 'outside', 'beyond', 'cpu'].map((k) =>
          `${k} ${median(rows.map((r) => r[k])).toFixed(2)} (${rows.map((r) => r[k].toFixed(2)).join(', ')})`).join('; '));
  }
  if (loads.length) {
    console.log(`\n${LOAD_CLIENTS} clients at once for ${LOAD_SECONDS} s, new questions about the cached state (after each server's rows above; cpu: ms a request, all its threads, then its main thread's):\n`);
    console.log('| build | server flags | requests | requests/s | cpu | main thread cpu |\n|---|---|---|---|---|---|');
    for (const line of loads) console.log(line);
    const floor = (name: string, r: LoadRow) => console.log(`| ${name} | | ${r.requests} | ${r.perSecond.toFixed(0)} | ${r.cpu.toFixed(3)} | ${r.mainCpu.toFixed(3)} |`);
    floor('a bare Koa server (its floor)', await bareUnderLoad('bare'));
    floor('a bare Koa server and a call to a child process over IPC a request', await bareUnderLoad('hop'));
  }
  const engine = median(cached.map((r) => r.engine));
  const between = median(cached.map((r) => r.client)) - engine;
  const [hold, gap] = [Math.round(engine), Math.round(between)];
  console.log(`\nThe hop's floor on this machine: two bare Node processes passing a call of the same size and its reply, idle ${hold} ms then ${gap} ms between calls (as above), median ms:\n`);
  console.log('| link | hop |\n|---|---|');
  console.log(`| the IPC pipe alone (advanced serialization) | ${(await hopFloor(pipeLink(), 1000, hold, gap)).toFixed(2)} |`);
  for (const busyPollMs of [0, 20]) console.log(`| the channel, \`--busy-poll-ms ${busyPollMs}\` | ${(await hopFloor(channelLink(busyPollMs), 1000, hold, gap)).toFixed(2)} |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
