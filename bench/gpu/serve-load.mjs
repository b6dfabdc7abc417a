// The server's benchmark on the GPU machine (issue 26), run by bench/gpu/serve.sh: plain Node, no
// packages. Waits for the server (its URL from the log; --server-pid: a server that died is noticed at
// once, and TQ_LOAD_READY_S, 120, bounds the wait), then over HTTP on the same machine:
//   cold:  one question about a new ~1,000-token state, one request at a time;
//   warm:  the first state again (its prefix cached);
//   load:  TQ_LOAD_CLIENTS (64) clients for TQ_LOAD_SECONDS (20 s), each request one question about a
//          state from a pool: every other request a warm one (8 states asked before), the others new;
//          requests/s, prompt tokens/s (the server's /metrics counter), latencies, and the server process's CPU
//          (Linux's /proc: all its threads a request, and how busy its main thread was). With the channel to the
//          engine spun on (--busy-poll-ms, a CUDA device's default: src/server/engine-process/channel.ts) the main
//          thread polls its ring between events while calls are pending, and does not sleep: its busy share counts
//          that polling, whatever the work. Whether the front end bounds the load is read from requests/s against the
//          in-flight replay below, and the main thread's work a request from `npm run bench:frontend`'s load;
//   warm, after the load: the warm state again, TQ_LOAD_STEADY_RUNS (200) requests one at a time, on a server
//          that has answered thousands (V8 compiles a request's path over its first thousands: bench/README.md,
//          "Front end"), with the client's time less the engine's call, against issue 65's 0.5 ms.
// OUT/serve.json and serve.md are written there, and the server stopped (its GPU memory freed); then
//   engine alone: the same kind of work through tq_cli (the engine's ceiling in the same run): the
//          load phase's requests, by their token ids, in calls of as many requests as the server
//          merged on average, with the server's KV cache budget (--gpu-memory-utilization, passed on: with
//          tq_cli's own, sized by the context, the warm states were evicted and computed again), one call at a
//          time and then with two in flight (tq_cli --in-flight 2: the engine's ceiling, each call launched while
//          the device runs the one before); serve.json and serve.md written again after each. TQ_LOAD_REPLAY=0 leaves
//          the replay out (a second arm of the same server's load: the window's serve-engines step).
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const out = arg('out');
const workload = JSON.parse(fs.readFileSync(arg('workload'), 'utf8'));
const clients = Number(process.env.TQ_LOAD_CLIENTS ?? 64);
const seconds = Number(process.env.TQ_LOAD_SECONDS ?? 20);
const readyS = Number(process.env.TQ_LOAD_READY_S ?? 120);
const serverPid = Number(arg('server-pid', 0));
const runs = Number(process.env.TQ_LOAD_RUNS ?? 20);
const replayed = process.env.TQ_LOAD_REPLAY !== '0';
const steadyRuns = Number(process.env.TQ_LOAD_STEADY_RUNS ?? 200);

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
const summary = (xs) => ({ n: xs.length, p50: quantile(xs, 0.5), p99: quantile(xs, 0.99) });
const stages = (header) => Object.fromEntries((header ?? '').split(';').filter(Boolean).map((s) => s.split('=')).map(([k, v]) => [k, Number(v)]));

/** CPU seconds so far of a process (all its threads) and of its main thread, from /proc; undefined without it. */
const clockTicks = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100;
  } catch {
    return 100;
  }
})();
const cpuSeconds = (pid) => {
  const read = (file) => {
    const fields = fs.readFileSync(file, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;  // utime + stime
  };
  try {
    return { process: read(`/proc/${pid}/stat`), main: read(`/proc/${pid}/task/${pid}/stat`) };
  } catch {
    return undefined;
  }
};

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function serverUrl(log, timeoutMs = readyS * 1000) {
  const t0 = Date.now();
  for (;;) {
    if (serverPid && !alive(serverPid)) throw new Error(`the server (pid ${serverPid}) exited before it was ready; its log: ${log}`);
    const m = /listening at (http:\/\/[^;" ]+)/.exec(fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '');
    if (m) {
      const ready = await fetch(`${m[1]}/ready`).then((r) => r.status === 200, () => false);
      if (ready) return { url: m[1], readyMs: Date.now() - t0 };
    }
    if (Date.now() - t0 > timeoutMs) throw new Error(`the server was not ready after ${timeoutMs} ms; its log: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const { url, readyMs } = await serverUrl(arg('log'));
// The timed requests go through node:http on kept-alive connections (one a client): Node's fetch (undici) costs the
// client more, time a request's figure would carry that is not the server's (a cached request's client side: 2.7 ms
// with fetch, 1.5 with node:http, AVX2 EPYC 2026-11-26, bench/history/2026-11.md; 0.41 against 0.16 ms a request to
// a bare node:http server there, 2026-12-01).
const agent = new http.Agent({ keepAlive: true, maxSockets: clients + 1 });
/** A request to the server: { status, headers (lower-cased names), text }; a server that hangs past 60 s fails the step. */
const request = (method, route, body, headers = {}) =>
  new Promise((resolve, reject) => {
    const sent = body === undefined ? undefined : Buffer.from(body);
    const req = http.request(`${url}${route}`, { method, agent, headers: sent ? { ...headers, 'content-length': sent.length } : headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.setTimeout(60_000, () => req.destroy(new Error(`no answer to ${method} ${route} in 60 s`)));
    req.on('error', reject);
    req.end(sent);
  });
const ask = async (state, debug = false) => {
  const t0 = performance.now();
  const res = await request('POST', '/v1/systemone', JSON.stringify({ state, questions: { q: workload.question } }),
    { 'content-type': 'application/json', ...(debug ? { 'x-service-debug': 'readout' } : {}) });
  const body = JSON.parse(res.text);
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`${res.status}: ${res.text}`);
  return { ms, serverMs: Number(res.headers['x-service-server-ms']), stages: stages(res.headers['x-service-stages']), readout: body.readout?.q };
};
const metric = async (name) => {
  const { text } = await request('GET', '/metrics');
  return text.split('\n').filter((l) => l.startsWith(name)).reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
};

let next = 0;  // the next state no request has used
const fresh = () => workload.states[next++ % workload.states.length];
await ask(fresh());  // first-call allocations
// Where a request's time went, stage by stage (x-service-stages): each stage's p50, the server's whole
// (x-service-server-ms), its own part (that less the engine and the wait, as npm run bench:frontend has it) and
// the client's time outside the server (the HTTP exchange and the JSON on the client's side).
const byStage = (responses) => {
  const keys = [...new Set(responses.flatMap((r) => Object.keys(r.stages)))];
  const p50 = (f) => quantile(responses.map(f), 0.5);
  return { server: p50((r) => r.serverMs), own: p50((r) => r.serverMs - (r.stages.engine ?? 0) - (r.stages.wait ?? 0)),
    outside: p50((r) => r.ms - r.serverMs), ...Object.fromEntries(keys.map((k) => [k, p50((r) => r.stages[k] ?? 0)])) };
};
const coldResponses = [];
for (let i = 0; i < runs; i++) coldResponses.push(await ask(fresh()));
const warmState = workload.states[1];
const warmResponses = [];
for (let i = 0; i < runs; i++) warmResponses.push(await ask(warmState));

// The load: the warm pool asked once first, with their token ids (as every state below, for tq_cli).
const pool = Array.from({ length: 8 }, () => fresh());
const tokens = new Map();  // state -> readout (prompt token ids, state token count, label ids)
for (const state of pool) tokens.set(state, (await ask(state, true)).readout);
const loadStates = [];
const latencies = [];
const tokens0 = await metric('tqserve_prompt_tokens_total');
const batch0 = [await metric('tqserve_batch_size_sum'), await metric('tqserve_batch_size_count')];
const cpu0 = serverPid ? cpuSeconds(serverPid) : undefined;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: clients }, async (_, c) => {
    for (let i = c; performance.now() - t0 < seconds * 1000; i++) {
      const state = i % 2 === 0 ? pool[i % pool.length] : fresh();
      loadStates.push(state);
      latencies.push((await ask(state)).ms);
    }
  }),
);
const elapsed = (performance.now() - t0) / 1000;
const cpu1 = cpu0 && cpuSeconds(serverPid);
const serverCpu = cpu1 ? { serverCpuMsPerRequest: (1000 * (cpu1.process - cpu0.process)) / latencies.length, serverMainThreadBusy: (cpu1.main - cpu0.main) / elapsed } : {};
const promptTokens = (await metric('tqserve_prompt_tokens_total')) - tokens0;
const merged = ((await metric('tqserve_batch_size_sum')) - batch0[0]) / Math.max(1, (await metric('tqserve_batch_size_count')) - batch0[1]);
// The warm state once more (its blocks cached again, had the load's new states evicted them), then measured.
await ask(warmState);
const steadyResponses = [];
for (let i = 0; i < steadyRuns; i++) steadyResponses.push(await ask(warmState));
const health = JSON.parse((await request('GET', '/health')).text);

/** A scenario's latencies, its engine call's p50 and host planning's, where its time went, and the client's time less the engine's call (p50 of each request's). */
const scenario = (responses) => ({ ...summary(responses.map((r) => r.ms)), engineP50: quantile(responses.map((r) => r.stages.engine), 0.5),
  planP50: quantile(responses.map((r) => r.stages.plan), 0.5), stagesP50: byStage(responses), beyondEngineP50: quantile(responses.map((r) => r.ms - r.stages.engine), 0.5) });
const result = {
  device: arg('device'),
  client: 'node:http, kept-alive connections',
  readyMs,
  // engineP50: the engine call; planP50: of it, the engine's host planning before its steps ran (x-service-stages plan).
  cold: scenario(coldResponses),
  warm: scenario(warmResponses),
  warmAfterLoad: scenario(steadyResponses),
  load: { clients, seconds: elapsed, requests: latencies.length, requestsPerSecond: latencies.length / elapsed, promptTokensPerSecond: promptTokens / elapsed, meanMergedBatch: merged, ...summary(latencies), ...serverCpu },
  // Each engine's KV cache budget and what sized it (engines sharing the GPU: the first's share, the others its size).
  health: { device: health.base?.device, memory: health.base?.memory ?? health.memory, engines: health.engines?.processes?.map((p) => p.cache_budget) ?? [] },
  // The forward the server ran (by default the device's: on CUDA the fused kernels, the cascade and CUDA graphs).
  forward: { kernels: health.kernels, attention: health.attention, cudaGraphs: health.cuda_graphs },
};
const f = (x) => x.toFixed(1);
function write() {
  fs.writeFileSync(path.join(out, 'serve.json'), JSON.stringify(result, null, 2));
  const md = [
    `# tqserve over HTTP, --device ${result.device}`,
    '',
    `ready after ${(readyMs / 1000).toFixed(1)} s (from the first look at its log); kernels ${result.forward.kernels}, ` +
      `attention ${result.forward.attention}, CUDA graphs ${result.forward.cudaGraphs ? 'on' : 'off'}`,
    '',
    '| scenario | p50 (ms) | p99 (ms) | engine p50 (ms) | of it, the host planning, p50 (ms) |',
    '|---|---|---|---|---|',
    `| one question, new ~1,000-token state (${runs} runs) | ${f(result.cold.p50)} | ${f(result.cold.p99)} | ${f(result.cold.engineP50)} | ${f(result.cold.planP50)} |`,
    `| the same state again, warm (${runs} runs) | ${f(result.warm.p50)} | ${f(result.warm.p99)} | ${f(result.warm.engineP50)} | ${f(result.warm.planP50)} |`,
    `| ${clients} clients x ${f(result.load.seconds)} s, half warm | ${f(result.load.p50)} | ${f(result.load.p99)} | | |`,
    `| the same state again, warm, after the load (${steadyRuns} runs) | ${f(result.warmAfterLoad.p50)} | ${f(result.warmAfterLoad.p99)} | ${f(result.warmAfterLoad.engineP50)} | ${f(result.warmAfterLoad.planP50)} |`,
    '',
    'Where one request\'s time went, p50 of each in ms (x-service-stages; own: the server less the engine and the wait; outside: the client\'s time less the server\'s):',
    ...['cold', 'warm', 'warmAfterLoad'].map((k) => `- ${k}: ` + Object.entries(result[k].stagesP50).map(([stage, ms]) => `${stage} ${ms.toFixed(2)}`).join(', ')),
    '',
    `A warm request over HTTP less its engine call, p50: ${result.warm.beyondEngineP50.toFixed(2)} ms just after the start, ` +
      `${result.warmAfterLoad.beyondEngineP50.toFixed(2)} ms after the load (issue 65's goal: at most 0.5 ms).`,
    '',
    `Load: ${f(result.load.requestsPerSecond)} requests/s, ${Math.round(result.load.promptTokensPerSecond)} prompt tokens/s (mean merged batch ${f(merged)})` +
      (result.load.serverMainThreadBusy !== undefined
        ? `; the server process's CPU ${result.load.serverCpuMsPerRequest.toFixed(2)} ms a request (all its threads), its main thread busy ${(100 * result.load.serverMainThreadBusy).toFixed(0)}% of the load (its polling of the channel included)`
        : '') +
      (result.engineAlone
        ? `; the same requests through tq_cli alone: ${Math.round(result.engineAlone.promptTokensPerSecond)} prompt tokens/s ` +
          `(${(100 * result.engineAlone.cachedShare).toFixed(0)}% of them from its prefix cache); ` +
          `the server delivers ${(100 * result.load.shareOfEngineAlone).toFixed(0)}% of it.`
        : '; the engine-alone replay has not run (yet).') +
      (result.engineInFlight
        ? ` With two calls in flight (each launched while the device runs the one before) tq_cli gives ` +
          `${Math.round(result.engineInFlight.promptTokensPerSecond)} prompt tokens/s, ${f(result.engineInFlight.promptTokensPerSecond / result.engineAlone.promptTokensPerSecond)}x ` +
          `one at a time (a call's p50 ${f(result.engineInFlight.callP50)} ms against ${f(result.engineAlone.callP50)} ms): ` +
          `the server delivers ${(100 * result.load.shareOfInFlight).toFixed(0)}% of that ceiling.`
        : ''),
    '',
  ];
  fs.writeFileSync(path.join(out, 'serve.md'), md.join('\n'));
  return md;
}
write();  // before the replay: a kill there keeps the server's figures
if (!replayed) {
  agent.destroy();  // its idle connections closed before the server's drain
  if (serverPid) process.kill(serverPid, 'SIGTERM');
  console.log(write().join('\n'));
  process.exit(0);
}

// Every state's token ids, then the server stopped: the replay's tq_cli gets the memory it held.
for (const state of new Set(loadStates)) if (!tokens.has(state)) tokens.set(state, (await ask(state, true)).readout);
agent.destroy();
if (serverPid) {
  process.kill(serverPid, 'SIGTERM');
  for (let i = 0; i < 300 && alive(serverPid); i++) await new Promise((r) => setTimeout(r, 100));
}
// The engine alone: the load's requests in order, in calls of the server's mean merged batch.
const perCall = Math.max(1, Math.round(merged));
const calls = [];
for (let i = 0; i < loadStates.length; i += perCall)
  calls.push(loadStates.slice(i, i + perCall).map((s) => {
    const r = tokens.get(s);
    return { state: r.prompt_token_ids.slice(0, r.state_token_count), questions: [{ tokens: r.prompt_token_ids.slice(r.state_token_count), labelIds: r.label_token_ids }] };
  }));
const callsFile = path.join(os.tmpdir(), `tq-engine-calls-${process.pid}.json`);
fs.writeFileSync(callsFile, JSON.stringify({ calls }));
const memory = arg('gpu-memory-utilization') ? ['--gpu-memory-utilization', arg('gpu-memory-utilization')] : [];
const engineTokens = calls.flat().reduce((n, r) => n + r.state.length + r.questions[0].tokens.length, 0);
/** The calls through tq_cli, one at a time or with the next launched while the device runs one (--in-flight 2). */
function replay(inFlight) {
  const cli = JSON.parse(execFileSync(arg('cli'), ['answer', '--model', arg('model'), '--calls', callsFile, '--dtype', 'bf16', '--device', arg('device'),
    '--in-flight', String(inFlight), ...memory], { encoding: 'utf8', maxBuffer: 1 << 30 }));
  const engineMs = cli.repeatMs[0];
  const cachedTokens = cli.calls.flat().reduce((n, r) => n + (r.cachedTokens ?? 0), 0);
  // A call's wall: from its launch until its answers are on the host (with two in flight, finished after the next's launch).
  return { inFlight, requests: loadStates.length, calls: calls.length, seconds: engineMs / 1000, promptTokensPerSecond: engineTokens / (engineMs / 1000),
    cachedShare: cachedTokens / engineTokens, callP50: quantile(cli.wallMs[0], 0.5) };
}
result.engineAlone = replay(1);
result.load.shareOfEngineAlone = result.load.promptTokensPerSecond / result.engineAlone.promptTokensPerSecond;
write();
// The engine's ceiling (issue 65): calls in flight, as the server's engine process hands them with --calls-in-flight 2.
result.engineInFlight = replay(2);
result.load.shareOfInFlight = result.load.promptTokensPerSecond / result.engineInFlight.promptTokensPerSecond;
fs.rmSync(callsFile);
console.log(write().join('\n'));
