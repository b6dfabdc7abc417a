/**
 * Hostile input changes nothing: each class a generated request stream found
 * (deep nesting, prototype names, the renderer's split marker, huge states,
 * oversized bodies (gzip bombs, 70 MiB sent at full speed), memory kept after a burst of large bodies, unknown
 * methods) has its reproducer here, and a
 * seeded stream of generated requests checks the invariants: no 5xx, every
 * error has a `detail`, every response a request id, every 200 answers exactly
 * the questions sent, and a known-good request answers the same throughout.
 */
import * as fs from 'fs';
import * as http from 'http';
import * as zlib from 'zlib';
import { toSpec } from '../../src/answering/pipeline';
import { choiceAnswer, scoreAnswer } from '../../src/answering/answers';
import { validate } from '../../src/wire/validation';
import { Deep, hostileRequest, nested, rng, SPLIT_MARKER, toJson } from '../helpers/hostile';
import { detailText, expectProblems, expectSameAnswers, rawRequest, serverForFile, startServer } from '../helpers/server';

const server = serverForFile();

/**
 * `head`, then `fill` repeated `times`, then `tail`, written into one buffer: the bytes of the string built with
 * `repeat()` and a template, without the client's own large strings and their copies, which cost this test's process
 * seconds of page faults per body on a VM.
 */
function repeatedBetween(head: string, fill: string, times: number, tail: string): Buffer {
  const start = Buffer.byteLength(head);
  const end = start + Buffer.byteLength(fill) * times;
  const out = Buffer.allocUnsafe(end + Buffer.byteLength(tail));
  out.write(head);
  out.fill(fill, start, end);
  out.write(tail, end);
  return out;
}

/** JSON.stringify({ ...body, [key]: lead + fill.repeat(times) }), as one buffer (repeatedBetween; `fill` needs no escaping in JSON). */
function jsonWithLongString(body: object, key: string, lead: string, fill: string, times: number): Buffer {
  const [head, tail] = JSON.stringify({ ...body, [key]: '\u0000' }).split('\\u0000');
  return repeatedBetween(head + JSON.stringify(lead).slice(1, -1), fill, times, tail);
}

/** A process's resident memory in KiB. */
const rssKiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

const good = {
  state: 'The warehouse in Rotterdam received 42 pallets; two were damaged by water.',
  questions: { damaged: { type: 'noul' }, action: { type: 'choice', criteria: { refund: null, replace: null } }, urgency: { type: 'score', criteria: ['low', 'mid', 'high'] } },
};

test('deep nesting in the fields the model reads is 422 naming the limit; elsewhere it is ignored', async () => {
  for (const body of [
    toJson({ state: new Deep(4500), questions: { q: { type: 'noul' } } }),
    toJson({ state: 'x', questions: { q: { type: 'noul', instructions: new Deep(4500) } } }),
    { state: 'x', questions: { q: { type: 'choice', criteria: { a: nested(300), b: null } } } },
    { state: 'x', questions: { q: { type: 'score', criteria: ['low', nested(257)] } } },
  ]) {
    const r = await server.post('/v1/systemone', body);
    expect(r.status).toBe(422);
    expectProblems(r.body);
    expect(detailText(r.body)).toMatch(/nested \d+ levels deep; at most 256 levels/);
  }
  expect((await server.post('/v1/answer', toJson({ state: 'x', questions: [{ kind: 'noul', instructions: new Deep(4500) }] }))).status).toBe(422);
  // At the limit it renders; an unknown field is never an error, however deep.
  expect((await server.post('/v1/systemone', { state: nested(256), questions: { q: { type: 'noul' } } })).status).toBe(200);
  expect((await server.post('/v1/systemone', toJson({ ...good, extension: new Deep(4500) }))).status).toBe(200);
});

test('__proto__, constructor and prototype are names like any other, everywhere', async () => {
  const body = JSON.parse(`{
    "state": {"__proto__": "owner", "constructor": "x"},
    "questions": {
      "__proto__": {"type": "choice", "criteria": {"__proto__": null, "constructor": {"prototype": 1}, "prototype": "p"}},
      "constructor": {"type": "noul", "criteria": {"true": "yes", "__proto__": {"polluted": true}}},
      "toString": {"type": "score", "criteria": ["low", "high"]}
    },
    "unknown": {"__proto__": {"polluted": true}}
  }`);
  const r = await server.post('/v1/systemone', body);
  expect(r.status).toBe(200);
  expect(Object.keys(r.body.answers)).toEqual(['__proto__', 'constructor', 'toString']);
  expect(Object.keys(r.body.answers['__proto__'].probabilities)).toEqual(['__proto__', 'constructor', 'prototype']);
  expect(['__proto__', 'constructor', 'prototype']).toContain(r.body.answers['__proto__'].choice);

  const a = await server.post('/v1/answer', { state: 'x', questions: [{ kind: 'choice', options: ['__proto__', 'constructor', 'prototype'] }] });
  expect(a.status).toBe(200);
  expect(a.body.answers[0].options).toEqual(['__proto__', 'constructor', 'prototype']);
  expect(a.body.answers[0].probabilities).toHaveLength(3);
  // Nothing leaked into later responses.
  const later = await server.post('/v1/systemone', good);
  expect(JSON.stringify(later.body)).not.toContain('polluted');
});

test('in process: parsing, validating and answering such names never touches a prototype', () => {
  const before = Object.getOwnPropertyNames(Object.prototype).sort();
  const body = JSON.parse('{"state": "x", "questions": {"__proto__": {"type": "choice", "criteria": {"__proto__": {"polluted": 1}, "constructor": null}}, "s": {"type": "score", "criteria": [{"__proto__": {"polluted": 1}}, "b"]}}, "__proto__": {"polluted": 1}}');
  expect(validate('systemone', body)).toEqual([]);
  const choice = toSpec(body.questions['__proto__']);
  expect(choice.options.map((o) => o.key)).toEqual(['__proto__', 'constructor']);
  const answer = choiceAnswer(['__proto__', 'constructor'], new Map([['__proto__', 0.75], ['constructor', 0.25]]));
  expect(Object.getOwnPropertyNames(answer.probabilities)).toEqual(['__proto__', 'constructor']);
  expect(Object.getPrototypeOf(answer.probabilities)).toBe(Object.prototype);
  const score = scoreAnswer(body.questions.s.criteria, new Map([['0', 0.5], ['1', 0.5]]));
  expect(JSON.stringify(score.legend)).toBe('{"0":{"__proto__":{"polluted":1}},"1":"b"}');
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(before);
  expect(({} as any).polluted).toBeUndefined();
});

test("the renderer's old split marker in a state is just text: the state is shared, not repeated per question", async () => {
  const usage = async (state: string, n: number) => {
    const questions = Object.fromEntries(Array.from({ length: n }, (_, i) => [`q${i}`, { type: 'noul', instructions: `Question ${i}?` }]));
    const r = await server.post('/v1/systemone', { state, questions });
    expect(r.status).toBe(200);
    return r.body.usage.input_tokens as number;
  };
  const text = 'The first half of the state. ' + 'More words here. '.repeat(20);
  const marked = 'The first half of the state.' + SPLIT_MARKER + ' ' + 'More words here. '.repeat(20);
  const one = (await usage(marked, 1)) - (await usage(text, 1));
  const three = (await usage(marked, 3)) - (await usage(text, 3));
  // The marker's own few tokens, counted once whatever the number of questions.
  expect(one).toBeLessThanOrEqual(8);
  expect(three).toBe(one);
});

test('a 60 MiB state is refused before tokenizing, in bounded memory, while small requests keep answering', async () => {
  const huge = jsonWithLongString({ state: '', questions: { q: { type: 'noul' } } }, 'state', '', 'word ', 12 << 20);
  // What this machine, as loaded now, takes to decode and parse the body: the server must do that much once.
  const t = performance.now();
  JSON.parse(huge.toString('utf8'));
  const parseMs = performance.now() - t;
  const done = rawRequest(server.url, 'POST', '/v1/systemone', huge, { 'content-type': 'application/json' });
  let finished = false;
  done.finally(() => (finished = true));
  const latencies: number[] = [];
  while (!finished) {
    const t0 = performance.now();
    const r = await server.post('/v1/systemone', good);
    expect(r.status).toBe(200);
    latencies.push(performance.now() - t0);
  }
  const r = await done;
  expect(r.status).toBe(422);
  expect(JSON.parse(r.body).detail).toMatch(/longer than the context: at least \d+ tokens \(\d+ bytes of text, refused before tokenizing\), the context holds 32768/);
  // Usual small-request latency here is ~10-30 ms; before, one huge request held them up to 5.7 s (tokenizing
  // it). The slowest one waits for the server to read and parse the 60 MiB body, so the bound scales with this
  // machine's load: 2 s plus 3 parses (a fixed 3 s bound failed at 3.08 s on a 2-core machine running two
  // test suites at once; parseMs is ~0.3 s there when quiet).
  expect(Math.max(...latencies)).toBeLessThan(2000 + 3 * parseMs);
  const peakKiB = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.process.pid}/status`, 'utf8'))![1]);
  // Before: 11 GB. The body, its string and its parse: a few hundred MB.
  expect(peakKiB).toBeLessThan(1.5 * (1 << 20));
});

test('a state under the byte bound but over the context is counted exactly and refused with both lengths', async () => {
  const r = await server.post('/v1/systemone', { state: 'a' + ' a'.repeat(40000), questions: { q: { type: 'noul' } } });
  expect(r.status).toBe(422);
  expect(r.body.detail).toMatch(/longer than the context: 400\d\d tokens, the context holds 32768/);
});

test('a gzip body over the limit is 413 and the keep-alive connection stays usable', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const bomb = zlib.gzipSync(Buffer.alloc(70 << 20, 0x20));
    const r = await rawRequest(server.url, 'POST', '/v1/systemone', bomb, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, agent);
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).detail).toMatch(/larger than the limit of 64 MiB/);
    expect(r.headers.connection).toBe('close');
    const t0 = performance.now();
    const next = await rawRequest(server.url, 'POST', '/v1/systemone', JSON.stringify(good), { 'content-type': 'application/json' }, agent);
    expect(next.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(2000);
    // An uncompressed body declared over the limit is refused before it is read: the server answers at once,
    // then reads and discards what the client sends until it stops (the test below sends it all).
    const declared = await new Promise<{ status: number; connection?: string }>((resolve, reject) => {
      const req = http.request(server.url + '/v1/answer', { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': String((64 << 20) + 1) } }, (res) => {
        res.resume();
        resolve({ status: res.statusCode!, connection: res.headers.connection });
      });
      req.on('error', reject);
      req.write(' '.repeat(1024));
    });
    expect(declared).toEqual({ status: 413, connection: 'close' });
  } finally {
    agent.destroy();
  }
});

test('a 70 MiB body sent at full speed reads its 413, ten times over fresh and keep-alive connections: no EPIPE or reset, the server\'s memory unchanged', async () => {
  // Spaces: the size is refused, not the content. Declared (Content-Length: refused before reading)
  // or chunked (refused once 64 MiB are read). Before the lingering close, 1 in 20 ended in EPIPE here.
  const body = Buffer.alloc(70 << 20, 0x20);
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const outcomes: string[] = [];
  // Measured from after the first four (each kind once): the allocator keeps what a 64 MiB read took, and
  // a body retained per request would add 64 MiB or more each time, so six more must add less than one.
  let afterWarmUp = 0;
  try {
    for (let i = 0; i < 10; i++) {
      if (i === 4) afterWarmUp = rssKiB(server.process.pid!);
      const headers: Record<string, string> = { 'content-type': 'application/json', ...(i % 4 >= 2 ? { 'transfer-encoding': 'chunked' } : {}) };
      const outcome = await rawRequest(server.url, 'POST', '/v1/systemone', body, headers, i % 2 ? keepAlive : undefined).then(
        (r) => `${r.status} ${r.headers.connection}: ${JSON.parse(r.body).detail}`,
        (e) => `${e.code}: ${e.message}`,
      );
      outcomes.push(outcome);
    }
  } finally {
    keepAlive.destroy();
  }
  expect(outcomes).toEqual(new Array(10).fill('413 close: the body is larger than the limit of 64 MiB (decompressed)'));
  expect(rssKiB(server.process.pid!) - afterWarmUp).toBeLessThan(64 << 10);
});

test('after a burst of large bodies, the server process comes back within 2x its resident memory before it', async () => {
  // A server of its own: the baseline is a fresh server's, warmed by a few requests.
  const fresh = await startServer();
  try {
    for (let i = 0; i < 4; i++) expect((await fresh.post('/v1/systemone', { ...good, state: `${good.state} (${i})` })).status).toBe(200);
    const reference = (await fresh.post('/v1/systemone', good)).body;
    const before = rssKiB(fresh.process.pid!);
    const mib = 1 << 20;
    // Near the 64 MiB limit, each refused or answered at a different point: answered (a large unknown field),
    // malformed JSON, a state refused by its byte bound. Three at a time, as concurrent clients send them.
    const bodies = Array.from({ length: 18 }, (_, i) => [
      () => jsonWithLongString(good, 'padding', '', 'z', 60 * mib + i),
      () => repeatedBetween('{"state": "', 'a', 50 * mib + i, '", "questions": '),
      () => jsonWithLongString(good, 'state', `${i} `, 'refund parcel ', 3 * mib),
    ][i % 3]);
    const statuses: number[] = [];
    // The burst's peak: read as each batch is answered, before the server has been idle the second it waits to
    // reclaim (ops/reclaim.ts); a slow client (a busy machine) may let it reclaim between batches.
    let during = 0;
    for (let i = 0; i < bodies.length; i += 3) {
      const sent = bodies.slice(i, i + 3).map((body) => rawRequest(fresh.url, 'POST', '/v1/systemone', body(), { 'content-type': 'application/json' }));
      for (const r of await Promise.all(sent)) {
        statuses.push(r.status);
        if (r.status === 200) expectSameAnswers(JSON.parse(r.body), reference, 0);
      }
      during = Math.max(during, rssKiB(fresh.process.pid!));
    }
    expect(statuses).toEqual(Array.from({ length: 18 }, (_, i) => [200, 422, 422][i % 3]));
    // The server logs each reclaim; the one after the burst is awaited.
    const reclaims = () => fresh.log().split('\n').filter((l) => l.includes('"memory_reclaimed"')).length;
    const duringBurst = reclaims();
    while (reclaims() === duringBurst) await new Promise((r) => setTimeout(r, 50));
    const after = rssKiB(fresh.process.pid!);
    expect({ during_grew: during > 2 * before, after_within_2x: after <= 2 * before }).toEqual({ during_grew: true, after_within_2x: true });
    expectSameAnswers((await fresh.post('/v1/systemone', good)).body, reference, 0);
  } finally {
    await fresh.stop();
  }
});

test('2,200 questions over the KV budget: 400 stating the real need, which a large enough budget then answers', async () => {
  const body = { state: 'x', questions: Object.fromEntries(Array.from({ length: 2200 }, (_, i) => [`q${i}`, { type: 'noul', instructions: `Is item ${i} damaged?` }])) };
  const r = await server.post('/v1/systemone', body);
  expect(r.status).toBe(400);
  const m = /needs (\d+) KV blocks of 16 tokens \((\d+) tokens in (\d+) segments.*\) but the cache holds 4096 blocks \((\d+) MiB\)/.exec(r.body.detail)!;
  expect(m).not.toBeNull();
  const [need, segments, mib] = [Number(m[1]), Number(m[3]), Number(m[4])];
  expect(need).toBeGreaterThan(4096);
  // The state, each question, and the question text they share (computed once).
  expect(segments).toBeGreaterThan(2200);
  const roomy = await startServer(['--cache-mib', String(Math.ceil((need * mib) / 4096) + 1)]);
  try {
    const ok = await roomy.post('/v1/systemone', body);
    expect(ok.status).toBe(200);
    expect(Object.keys(ok.body.answers)).toHaveLength(2200);
  } finally {
    await roomy.stop();
  }
});

// Every kind comes about sixty times (49 kinds): the stream's time is a share of the suite's ten minutes.
const STREAM = 3_000;
const STREAM_BUDGET_MS = 150_000;

test(`a seeded stream of ${STREAM} hostile requests: no 5xx, a detail on every error, a request id on every response, and a steady known-good answer`, async () => {
  const reference = await server.post('/v1/systemone', good);
  expect(reference.status).toBe(200);
  const r = rng(20261123);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const seen = new Map<string, number>();
  const t0 = performance.now();
  let sent = 0;
  try {
    for (; sent < STREAM && performance.now() - t0 < STREAM_BUDGET_MS; sent++) {
      const req = hostileRequest(r);
      const res = await rawRequest(server.url, req.method, req.route, req.body, req.headers, agent);
      const where = `${req.kind} ${req.method} ${req.route} → ${res.status}: ${res.body.slice(0, 300)}`;
      seen.set(`${req.kind} ${res.status}`, (seen.get(`${req.kind} ${res.status}`) ?? 0) + 1);
      expect([where, res.status < 500]).toEqual([where, true]);
      expect([where, res.headers['x-typesafe-request-id']]).toEqual([where, expect.stringMatching(/^req_/)]);
      if (res.status >= 400 && req.method !== 'HEAD') {
        const detail = JSON.parse(res.body).detail;
        expect([where, typeof detail === 'string' ? detail.length > 0 : Array.isArray(detail) && detail.length > 0]).toEqual([where, true]);
      }
      if (res.status === 200 && req.method === 'POST' && req.parsed) {
        const sentQuestions = (req.parsed as any).questions;
        const got = JSON.parse(res.body).answers;
        if (req.route === '/v1/systemone') expect([where, Object.keys(got)]).toEqual([where, Object.keys(sentQuestions)]);
        else got.forEach((a: any, i: number) => expect([where, a.probabilities.length]).toEqual([where, sentQuestions[i].kind === 'noul' ? 2 : sentQuestions[i].options.length]));
      }
      if (sent % 250 === 249) expectSameAnswers((await server.post('/v1/systemone', good)).body.answers, reference.body.answers);
    }
  } finally {
    agent.destroy();
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(`hostile stream: ${sent} requests in ${seconds.toFixed(1)} s; kinds → statuses:\n` + [...seen].map(([k, n]) => `  ${k}: ${n}`).sort().join('\n'));
  expect(sent).toBeGreaterThanOrEqual(STREAM / 4);
  expectSameAnswers((await server.post('/v1/systemone', good)).body.answers, reference.body.answers);
  expect((await server.get('/health')).body.ok).toBe(true);
});
