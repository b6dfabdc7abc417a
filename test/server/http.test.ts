/**
 * HTTP behaviour around the answers: identical requests in flight share one
 * computation; queued work whose client has gone is dropped; request ids,
 * Server-Timing, CORS, unknown methods.
 */
import * as http from 'http';
import * as net from 'net';
import { engineQueue, rawRequest, RunningServer, serverForFile, startServer, until } from '../helpers/server';
import { longState } from '../helpers/texts';
import { newRequestId } from '../../src/server/http/request-id';

const server = serverForFile();

const health = async () => (await server.get('/health')).body;
const post = (route: string, body: unknown, init: RequestInit = {}) =>
  fetch(server.url + route, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...init });

test('an identical body arriving while the first is computed joins it: same bytes, computed once', async () => {
  const before = await health();
  const body = { state: longState('joined', 10000), questions: { d: { type: 'noul' }, c: { type: 'choice', criteria: { x: null, y: null } } } };
  const first = post('/v1/systemone', body);
  await until(async () => (await engineQueue(server.url)).busy === 1, 'the first is computed');
  const second = post('/v1/systemone', body);
  const [a, b] = await Promise.all([first, second]);
  const [ta, tb] = [await a.text(), await b.text()];
  expect(a.status).toBe(200);
  expect(tb).toBe(ta);
  expect(b.headers.get('x-service-joined')).toBe(a.headers.get('x-typesafe-request-id'));
  expect(b.headers.get('x-typesafe-request-id')).not.toBe(a.headers.get('x-typesafe-request-id'));
  const after = await health();
  expect(after.requests.joined_identical_in_flight - before.requests.joined_identical_in_flight).toBe(1);
  expect(after.cache.lookups - before.cache.lookups).toBe(1);
});

test('a request whose client has gone before the engine takes it is dropped from the queue', async () => {
  const before = await health();
  // The engine is busy with this one (30,000 tokens: a second or more)...
  const busy = post('/v1/systemone', { state: longState('busy', 30000), questions: { d: { type: 'noul' } } });
  await until(async () => (await engineQueue(server.url)).busy === 1, 'the engine is busy');
  // ...while this one waits behind it, and its client gives up. (Waiting on the queue itself, not on a
  // clock: with fixed sleeps the busy request sometimes ended first on a fast machine or a slow one.)
  const controller = new AbortController();
  const gone = post('/v1/systemone', { state: 'queued then abandoned', questions: { d: { type: 'noul' } } }, { signal: controller.signal });
  await until(async () => (await engineQueue(server.url)).queued === 1, 'the second request waits in the engine queue');
  controller.abort();
  await expect(gone).rejects.toThrow();
  expect((await busy).status).toBe(200);
  const after = await health();
  expect(after.requests.dropped_client_gone - before.requests.dropped_client_gone).toBe(1);
  // Only the busy request reached the engine.
  expect(after.cache.lookups - before.cache.lookups).toBe(1);
  // The server answers the abandoned body normally when asked again.
  expect((await post('/v1/systemone', { state: 'queued then abandoned', questions: { d: { type: 'noul' } } })).status).toBe(200);
});

test('Server-Timing carries the stages of x-service-stages; both routes set them', async () => {
  for (const [route, body] of [
    ['/v1/systemone', { state: 'timing', questions: { d: { type: 'noul' } } }],
    ['/v1/answer', { state: 'timing', questions: [{ kind: 'noul' }] }],
  ] as const) {
    const r = await post(route, body);
    const stages = r.headers.get('x-service-stages')!.split(';').map((p) => p.split('='));
    const timing = r.headers.get('server-timing')!.split(', ').map((p) => p.split(';dur='));
    expect(timing).toEqual(stages);
    expect(stages.map(([k]) => k)).toEqual(['prepare', 'warm', 'questions', 'readout', 'engine', 'wait', 'hop', 'plan']);
  }
});

describe('one request at a time, the channel to the engine process spun on (a GPU host\'s default)', () => {
  const spun = serverForFile(['--busy-poll-ms', '20', '--threads', '1']);
  const waitStage = (headers: Headers) => Number(/(?:^|;)wait=([\d.]+)/.exec(headers.get('x-service-stages')!)![1]);

  test("a client's next request, sent as soon as its answer came, never waits behind the call before (its wait stage 0)", async () => {
    const ask = () => spun.post('/v1/systemone', { state: 'asked again and again', questions: { d: { type: 'noul' } } });
    expect((await ask()).status).toBe(200);
    // The state's registration (queued after its first answer) done: nothing else for the engine process to run.
    await until(async () => {
      const q = await engineQueue(spun.url);
      return q.busy === 0 && q.queued === 0;
    }, 'the engine is idle');
    const waits: number[] = [];
    for (let i = 0; i < 40; i++) waits.push(waitStage((await ask()).headers));
    // The last call used to stay in flight after its answer, reading the caches' counters for /metrics from the
    // engine thread, and the next request queued behind it: 0.7 ms of wait at the median (bench/README.md, "Front end").
    expect(waits.filter((w) => w > 0)).toEqual([]);
  });
});

test('every response has a request id, errors and unknown routes included', async () => {
  const responses = [
    await post('/v1/systemone', { state: 'x' }),
    await fetch(server.url + '/nothing'),
    await fetch(server.url + '/v1/systemone', { method: 'DELETE' }),
    await fetch(server.url + '/health'),
    await post('/v1/systemone', { state: 'x', questions: { d: { type: 'noul' } } }, { headers: { 'content-type': 'application/json', 'x-request-id': 'a b' } }),
  ];
  const ids = responses.map((r) => r.headers.get('x-typesafe-request-id'));
  for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{24}$/);
  expect(new Set(ids).size).toBe(ids.length);
  const honoured = await fetch(server.url + '/health', { headers: { 'x-request-id': 'proxy-7f3a' } });
  expect(honoured.headers.get('x-typesafe-request-id')).toBe('proxy-7f3a');
  expect(honoured.headers.get('x-request-id')).toBe('proxy-7f3a');
});

test('request ids drawn from the pooled random bytes stay well formed and distinct across refills', () => {
  const ids = Array.from({ length: 1000 }, newRequestId); // the pool holds 341: two refills
  for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{24}$/);
  expect(new Set(ids).size).toBe(ids.length);
});

// Node's http module: fetch refuses TRACE itself.
test.each(['PROPFIND', 'TRACE', 'MKCOL', 'PURGE', 'LINK', 'PUT', 'PATCH'])('%s on a route → 405 with a JSON detail and Allow', async (method) => {
  const r = await rawRequest(server.url, method, '/v1/systemone');
  expect(r.status).toBe(405);
  expect(r.headers.allow).toBe('POST');
  expect(JSON.parse(r.body).detail).toContain(`${method} is not allowed`);
  expect((await rawRequest(server.url, method, '/v1/nowhere')).status).toBe(404);
});

test("a request Node's parser refuses gets a JSON 400 with a request id, and the server stays up", async () => {
  const { port } = new URL(server.url);
  const reply = await new Promise<string>((resolve, reject) => {
    let data = '';
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write('GET /health HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n'));
    socket.on('data', (d) => (data += d));
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
  expect(reply).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
  expect(reply).toMatch(/x-typesafe-request-id: req_[0-9a-f]{24}\r\n/);
  expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)).detail).toMatch(/malformed HTTP request/);
  expect((await fetch(server.url + '/health')).status).toBe(200);
});

test('without --cors-origin no CORS headers are sent', async () => {
  const r = await fetch(server.url + '/health', { headers: { origin: 'https://app.example' } });
  expect(r.headers.get('access-control-allow-origin')).toBeNull();
});

describe('--cors-origin', () => {
  let cors: RunningServer;
  beforeAll(async () => {
    cors = await startServer(['--cors-origin', 'https://app.example']);
  });
  afterAll(() => cors.stop());

  test('a preflight from the origin is answered, and responses expose the request id and timings', async () => {
    const pre = await fetch(cors.url + '/v1/systemone', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, x-request-id' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
    expect(pre.headers.get('access-control-allow-headers')).toBe('content-type, x-request-id');
    const r = await fetch(cors.url + '/v1/systemone', {
      method: 'POST',
      headers: { origin: 'https://app.example', 'content-type': 'application/json' },
      body: JSON.stringify({ state: 'x', questions: { d: { type: 'noul' } } }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(r.headers.get('access-control-expose-headers')).toContain('x-typesafe-request-id');
    expect(r.headers.get('access-control-expose-headers')).toContain('server-timing');
  });

  test('another origin gets no Allow-Origin', async () => {
    const r = await fetch(cors.url + '/health', { headers: { origin: 'https://evil.example' } });
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
    expect(r.headers.get('vary')).toContain('Origin');
  });
});

test('idle keep-alive connections are kept 65 s, longer than the proxies in front keep theirs', async () => {
  const agent = new http.Agent({ keepAlive: true });
  try {
    const res = await rawRequest(server.url, 'GET', '/ready', undefined, {}, agent);
    expect(res.status).toBe(200);
    expect(res.headers['keep-alive']).toBe('timeout=65');
  } finally {
    agent.destroy();
  }
});
