/**
 * Operations over HTTP: /metrics as Prometheus text whose counters move with requests (requests,
 * prefix-cache hits, tokens, tasks); JSON log lines with request ids and no bodies unless
 * --log-bodies; GET /ready while loading, serving and after an engine death; the drain on SIGTERM
 * finishes the requests in flight and exits 0, answers those still unanswered at its deadline 503 (none reset), and a
 * second signal exits at once.
 */
import { execFileSync } from 'child_process';
import { priorExamples, priorQuestion } from '../helpers/tasks';
import { rawRequest, runServerProcess, RunningServer, startServer, until } from '../helpers/server';

jest.setTimeout(180_000);

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text exposition, checked: every sample's family declared once with HELP and TYPE, every value a number. */
function parseProm(text: string): Sample[] {
  const declared = new Map<string, { help: boolean; type?: string }>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const d = declared.get(meta[2]) ?? { help: false };
      if (meta[1] === 'HELP') {
        expect(d.help).toBe(false);
        d.help = true;
      } else {
        expect(d.type).toBeUndefined();
        expect(['counter', 'gauge', 'histogram', 'summary', 'untyped']).toContain(meta[3]);
        d.type = meta[3];
      }
      declared.set(meta[2], d);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    const family = [m[1], m[1].replace(/_(bucket|sum|count)$/, '')].find((n) => declared.has(n));
    if (!family) throw new Error(`sample of an undeclared family: ${line}`);
    const value = m[3] === '+Inf' ? Infinity : Number(m[3]);
    expect(Number.isNaN(value) && m[3] !== 'NaN').toBe(false);
    samples.push({ name: m[1], labels, value });
  }
  for (const [name, d] of declared) expect([name, d.help && d.type !== undefined]).toEqual([name, true]);
  return samples;
}

/** The sum of the samples named `name` whose labels include `labels`. */
const valueOf = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);

describe('metrics and logs', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.stop());
  const metrics = async () => {
    const r = await rawRequest(server.url, 'GET', '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseProm(r.body);
  };

  test('/metrics: counters move with requests, the prefix cache, tokens and tasks; every process reports', async () => {
    const before = await metrics();
    const body = { state: 'A long enough note about a parcel that never arrived, sent twice to hit the prefix cache.', questions: { q: priorQuestion } };
    for (let i = 0; i < 2; i++) expect((await server.post('/v1/systemone', body)).status).toBe(200);
    expect((await server.post('/v1/systemone', { state: 'x' })).status).toBe(422);
    const after = await metrics();
    const moved = (name: string, labels: Record<string, string> = {}) => valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(moved('tqserve_http_requests_total', { route: '/v1/systemone', method: 'POST', status: '200' })).toBe(2);
    expect(moved('tqserve_http_requests_total', { route: '/v1/systemone', status: '422' })).toBe(1);
    expect(moved('tqserve_http_request_duration_seconds_count', { route: '/v1/systemone' })).toBe(3);
    expect(moved('tqserve_engine_stage_duration_seconds_count', { stage: 'engine', service_route: 'text' })).toBe(2);
    expect(moved('tqserve_batch_size_count')).toBe(2);
    expect(moved('tqserve_prompt_tokens_total', { source: 'cached' })).toBeGreaterThan(10);
    expect(moved('tqserve_prompt_tokens_total', { source: 'computed' })).toBeGreaterThan(10);
    expect(moved('tqserve_prefix_cache_hit_tokens_total', { engine: 'text' })).toBeGreaterThan(10);
    expect(moved('tqserve_prefix_cache_lookups_total', { engine: 'text' })).toBe(2);
    expect(valueOf(after, 'tqserve_engine_up', { engine: 'text' })).toBe(1);
    expect(valueOf(after, 'tqserve_kv_cache_blocks', { engine: 'text', state: 'total' })).toBeGreaterThan(0);
    expect(valueOf(after, 'tqserve_state_boundaries_total', { engine: 'text', outcome: 'registered' })).toBeGreaterThan(0);
    for (const process of ['server', 'text_engine']) expect(valueOf(after, 'process_resident_memory_bytes', { process })).toBeGreaterThan(1e6);

    expect((await server.post('/v1/tasks', { id: 'prior', examples: priorExamples(120) })).body.applied).not.toBe('none');
    const withTask = await metrics();
    const r = await server.post('/v1/systemone', { state: 'Ticket: refund please', questions: { q: priorQuestion } });
    expect(r.headers.get('x-service-tasks')).toBe('prior');
    expect(valueOf(await metrics(), 'tqserve_tasks_applied_total', { kind: 'task' }) - valueOf(withTask, 'tqserve_tasks_applied_total', { kind: 'task' })).toBe(1);
  });

  test('logs: one JSON line per request with its id and fields, and no state or question text', async () => {
    const secret = 'the-secret-word-ZEBRA-42';
    const r = await server.post('/v1/systemone', { state: `Note: ${secret}`, questions: { q: priorQuestion } }, { 'x-request-id': 'req-ops-test-1' });
    expect(r.status).toBe(200);
    // Written just after the response (ops/access-log.ts).
    await until(async () => server.log().includes('"request_id":"req-ops-test-1"'), 'the request is logged');
    const lines = server.log().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const line = lines.find((l) => l.request_id === 'req-ops-test-1');
    expect(line).toMatchObject({ level: 'info', msg: 'request', method: 'POST', route: '/v1/systemone', status: 200, service_route: 'text', batch_size: 1, tasks: ['prior'] });
    expect(line.input_tokens).toBeGreaterThan(10);
    expect(typeof line.duration_ms).toBe('number');
    expect(typeof line.time).toBe('string');
    expect(server.log()).not.toContain(secret);
    expect(lines.find((l) => l.msg?.startsWith('serving '))).toMatchObject({ level: 'info', event: 'ready' });
  });
});

test('--log-bodies logs the body; --log-level debug adds the probes, which info leaves out', async () => {
  const [bodies, debug] = await Promise.all([startServer(['--log-bodies']), startServer(['--log-level', 'debug'])]);
  try {
    const body = { state: 'Note: logged-word-OKAPI', questions: { q: priorQuestion } };
    await Promise.all([bodies.post('/v1/systemone', body), bodies.get('/ready'), debug.get('/ready')]);
    const probes = (s: RunningServer) => s.log().split('\n').filter((l) => l.includes('"path":"/ready"'));
    await until(async () => bodies.log().includes('logged-word-OKAPI') && probes(debug).length > 0, 'both servers log their requests');
    expect(probes(bodies)).toHaveLength(0);
    expect(JSON.parse(probes(debug)[0])).toMatchObject({ level: 'debug', status: 200 });
  } finally {
    await Promise.all([bodies.stop(), debug.stop()]);
  }
});

test('/ready: 503 while the engines load, 200 once serving, 503 after an engine death', async () => {
  const { child, output, exited } = runServerProcess(['--port', '0', '--base', 'tiny-qwen3', '--dtype', 'fp32']);
  try {
    let url: string | undefined;
    for (let i = 0; i < 200 && !url; i++) {
      url = /listening at (http:\/\/[\d.]+:\d+)/.exec(output())?.[1];
      await new Promise((r) => setTimeout(r, 25));
    }
    // The route first, then /ready: the state only goes from loading to ready, so a /ready still loading after the
    // route's answer says the route was answered while loading (asked the other way round, the server could turn
    // ready in between).
    const route = await rawRequest(url!, 'POST', '/v1/systemone', '{}', { 'content-type': 'application/json' });
    const loading = await rawRequest(url!, 'GET', '/ready');
    if (loading.status !== 200) {
      expect(loading.status).toBe(503);
      expect(JSON.parse(loading.body)).toEqual({ ready: false, state: 'loading' });
      expect(route.status).toBe(503);
    }
    for (let i = 0; i < 400 && !/serving /.test(output()); i++) await new Promise((r) => setTimeout(r, 25));
    const ready = await rawRequest(url!, 'GET', '/ready');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toEqual({ ready: true, state: 'ready' });
    process.kill(JSON.parse((await rawRequest(url!, 'GET', '/health')).body).base.engine_process.pid, 'SIGKILL');
    let dead = await rawRequest(url!, 'GET', '/ready');
    for (let i = 0; i < 100 && dead.status !== 503; i++) {
      await new Promise((r) => setTimeout(r, 20));
      dead = await rawRequest(url!, 'GET', '/ready');
    }
    expect(dead.status).toBe(503);
    expect(JSON.parse(dead.body)).toEqual({ ready: false, state: 'engine dead' });
    const m = parseProm((await rawRequest(url!, 'GET', '/metrics')).body);
    expect(valueOf(m, 'tqserve_engine_up', { engine: 'text' })).toBe(0);
    expect(await exited).toBe(70);
  } finally {
    child.kill('SIGKILL');
  }
});

describe('the drain', () => {
  /** Requests long enough to be in flight when the signal comes: distinct 12k-token states (about 1.3 s each here), queued behind each other (--batch-tokens 0). */
  const slow = (url: string, n: number) =>
    Array.from({ length: n }, (_, i) =>
      rawRequest(url, 'POST', '/v1/systemone', JSON.stringify({ state: `Request ${i}: ` + 'a parcel and a refund and a question '.repeat(1500), questions: { q: priorQuestion } }), {
        'content-type': 'application/json',
      }),
    );

  test('SIGTERM: requests in flight finish (200), new connections are refused, the process exits 0', async () => {
    const server = await startServer(['--batch-tokens', '0']);
    const inFlight = slow(server.url, 4);
    await queued(server.url, 2);
    server.process.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    await expect(rawRequest(server.url, 'GET', '/ready')).rejects.toThrow(/ECONNREFUSED/);
    const answers = await Promise.all(inFlight);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(await server.exited).toBe(0);
    const lines = server.log().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const draining = lines.find((l) => l.signal === 'SIGTERM');
    expect(draining.requests_in_flight).toBeGreaterThan(0);
    expect(lines.find((l) => l.msg === 'drained: exiting')).toMatchObject({ finished: true });
  });

  /** Resolves once the engine's queue holds at least `n` calls (read from /metrics): the requests are in flight, not in the network. */
  const queued = async (url: string, n: number) => {
    for (;;) {
      const m = parseProm((await rawRequest(url, 'GET', '/metrics')).body);
      if (valueOf(m, 'tqserve_engine_queue_depth', { engine: 'text' }) >= n) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  test('a deadline shorter than the work: every request answered, 200 or 503 with Retry-After, none reset', async () => {
    // Four requests of about 1.3 s each, one after another, against a 0.5 s deadline.
    const server = await startServer(['--batch-tokens', '0', '--shutdown-timeout', '0.5']);
    const inFlight = slow(server.url, 4).map((p) => p.catch((e: Error) => e.message));
    await queued(server.url, 2);
    server.process.kill('SIGTERM');
    const answers = await Promise.all(inFlight);
    expect(answers.filter((a) => typeof a === 'string')).toEqual([]);
    const refused = answers.filter((a) => typeof a !== 'string' && a.status === 503) as { headers: Record<string, unknown>; body: string }[];
    expect(refused.length).toBeGreaterThanOrEqual(2);
    expect(answers.every((a) => typeof a !== 'string' && [200, 503].includes(a.status))).toBe(true);
    for (const r of refused) {
      expect(r.headers['retry-after']).toBe('1');
      expect(r.headers.connection).toBe('close');
      expect(JSON.parse(r.body).detail).toMatch(/shutting down.*--shutdown-timeout/);
    }
    expect(await server.exited).toBe(0);
    const lines = server.log().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    expect(lines.find((l) => /--shutdown-timeout reached/.test(l.msg))).toMatchObject({ requests_in_flight: refused.length });
    expect(lines.find((l) => l.msg === 'drained: exiting')).toMatchObject({ finished: false });
  });

  test('a server stopped while its engine loads: the engine process ends with it, quietly', async () => {
    const { child, output, exited } = runServerProcess(['--port', '0', '--base', 'tiny-qwen3', '--dtype', 'fp32']);
    // The engine process is forked first thing, and spends its first second loading libtorch.
    const children = () => { try { return execFileSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' }).trim().split('\n').map(Number); } catch { return []; } };
    let engines = children();
    while (!engines.length) {
      await new Promise((r) => setTimeout(r, 10));
      engines = children();
    }
    child.kill('SIGTERM');
    await exited;
    const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
    while (engines.some(alive)) await new Promise((r) => setTimeout(r, 50));
    // Everything they wrote read: the engine shares the server's stderr, which closes when both have ended.
    if (!child.stderr!.closed) await new Promise((r) => child.stderr!.once('close', r));
    expect(output()).not.toMatch(/"event":"ready"/);
    // Before, an engine that finished loading after the server had gone threw writing 'ready' to the closed channel.
    expect(output()).not.toMatch(/ERR_IPC_CHANNEL_CLOSED|Unhandled/);
  });

  test('a second signal exits at once, with code 1', async () => {
    const server = await startServer(['--batch-tokens', '0']);
    // Each settles to its status, or to null when its connection died with the process.
    const inFlight = slow(server.url, 4).map((p) => p.then((a) => a.status, () => null));
    await new Promise((r) => setTimeout(r, 300));
    server.process.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 50));
    server.process.kill('SIGINT');
    expect(await server.exited).toBe(1);
    expect(await Promise.all(inFlight)).toContain(null);
  });
});
