/** The server as a process: flags, start-up failures, the default base, and engine death. */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { flagDefs } from '../../src/config/flags';
import { engineQueue, killAndAwaitDeadHealth, runServerProcess, startServer, until } from '../helpers/server';
import { longState } from '../helpers/texts';

const root = path.resolve(__dirname, '..', '..');

test('--help lists every flag with its default and exits 0', async () => {
  const { output, exited } = runServerProcess(['--help']);
  expect(await exited).toBe(0);
  for (const d of flagDefs) {
    expect(output()).toContain(`--${d.name}`);
    if (d.default !== undefined) expect(output()).toContain(`(default: ${d.default})`);
  }
});

test.each([
  [['--bogus'], /unknown flag --bogus/],
  [['--port', 'eighty'], /--port must be a number/],
  [['--dtype', 'fp16'], /--dtype must be one of bf16, fp32/],
  [['--temperature-choice', '0'], /must be positive/],
  [['--port'], /--port needs a value/],
  [['--device', 'gpu'], /--device must be cpu, cuda or cuda:N/],
  [['--gpu-memory-utilization', '0'], /--gpu-memory-utilization must be more than 0 and at most 1, got 0/],
  [['--gpu-memory-utilization', '1.5'], /--gpu-memory-utilization must be more than 0 and at most 1, got 1.5/],
])('bad flags %j exit 2 with a message', async (args, message) => {
  const { output, exited } = runServerProcess(args as string[]);
  expect(await exited).toBe(2);
  expect(output()).toMatch(message);
});

test('the server forks its engines before it loads the HTTP app: main imports neither koa, ajv nor the routes', () => {
  // What dist/server/main.js imports, required alone (serve() runs only when it is the entry point): all of it loads
  // before the fork, so a heavy module here delays every engine's start (bench/README.md, "Where a start's time goes").
  const loaded: string[] = JSON.parse(
    execFileSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(root, 'dist', 'server', 'main.js'))}); console.log(JSON.stringify(Object.keys(require.cache)))`], { encoding: 'utf8' }),
  );
  expect(loaded.some((f) => f.endsWith(path.join('server', 'start-engines.js')))).toBe(true);
  for (const heavy of [`node_modules${path.sep}koa${path.sep}`, `node_modules${path.sep}ajv${path.sep}`, `node_modules${path.sep}prom-client${path.sep}`, `server${path.sep}routes${path.sep}`, `server${path.sep}app.js`])
    expect(loaded.filter((f) => f.includes(heavy))).toEqual([]);
});

test('a base that does not exist exits 1 naming it', async () => {
  const { output, exited } = runServerProcess(['--base', '/nonexistent/checkpoint', '--port', '0']);
  expect(await exited).toBe(1);
  expect(output()).toContain('/nonexistent/checkpoint');
});

test('--device cuda on this CPU build exits 1 saying the engine was built without CUDA', async () => {
  const { output, exited } = runServerProcess(['--base', 'tiny-qwen3', '--port', '0', '--device', 'cuda']);
  expect(await exited).toBe(1);
  expect(output()).toContain('built without CUDA');
});

test('/health says where the engine runs: mode cpu, no GPU, the libtorch version', async () => {
  const server = await startServer(['--base', 'tiny-qwen3', '--device', 'cpu']);
  try {
    const h = (await server.get('/health')).body;
    expect(h.mode).toBe('cpu');
    expect(h.gpu).toBeNull();
    expect(h.version.libtorch).toMatch(/^\d+\.\d+/);
    expect(h.version.cuda).toBeNull();
  } finally {
    await server.stop();
  }
});

/** GLIBC_TUNABLES as a process was started with it: glibc's start cuts its tunables apart in place (a NUL for each ':'), so the kernel's copy holds the first in the variable and each other as a piece of its own after it. */
function tunablesOf(pid: number): string | undefined {
  const pieces = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  const at = pieces.findIndex((e) => e.startsWith('GLIBC_TUNABLES='));
  if (at < 0) return undefined;
  let end = at + 1;
  while (end < pieces.length && pieces[end].startsWith('glibc.')) end++;
  return [pieces[at].slice('GLIBC_TUNABLES='.length), ...pieces.slice(at + 1, end)].join(':');
}

test("the engine process runs with malloc asking for huge pages and one arena, each unless the operator's GLIBC_TUNABLES names it", async () => {
  // Unset here (the suite sets it for every process: test/global-setup.ts), then an operator's value naming one of the two.
  for (const [given, expected] of [
    [undefined, 'glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1'],
    ['glibc.malloc.hugetlb=0', 'glibc.malloc.hugetlb=0:glibc.malloc.arena_max=1'],
  ]) {
    const server = await startServer(['--base', 'tiny-qwen3'], { GLIBC_TUNABLES: given as string });
    try {
      const pid = (await server.get('/health')).body.base.engine_process.pid;
      expect(tunablesOf(server.process.pid!)).toBe(given);
      expect(tunablesOf(pid)).toBe(expected);
    } finally {
      await server.stop();
    }
  }
});

test('a busy port exits 1 with a clear message', async () => {
  const blocker = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => blocker.once('listening', r));
  const port = (blocker.address() as net.AddressInfo).port;
  const { output, exited } = runServerProcess(['--base', 'tiny-qwen3', '--port', String(port)]);
  expect(await exited).toBe(1);
  expect(output()).toContain(`port ${port} on 127.0.0.1 is already in use`);
  blocker.close();
});

test('the default base with no checkpoint available serves its random-weight test model and says so', async () => {
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-hf-'));
  const server = await startServer(['--base', 'qwen3-0.6b', '--models-dir', empty], { HF_HUB_CACHE: empty });
  try {
    const h = await server.get('/health');
    expect(h.body.base.name).toBe('qwen3-0.6b');
    expect(h.body.base.served_name).toBe('tqserve-qwen3-0.6b');
    expect(h.body.base.random_weights).toBe(true);
    expect(h.body.base.note).toContain('Qwen/Qwen3-0.6B was not found');
    expect(server.log()).toContain('WARNING');
    expect((await server.get('/v1/models')).body.data[0].id).toBe('tqserve-qwen3-0.6b');
  } finally {
    await server.stop();
    fs.rmSync(empty, { recursive: true, force: true });
  }
});

test('a named base found in the Hugging Face cache layout is served from there', async () => {
  const hub = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-hf-'));
  const snap = path.join(hub, 'models--meta-llama--Llama-3.2-1B-Instruct', 'snapshots', 'abc123');
  fs.mkdirSync(snap, { recursive: true });
  fs.mkdirSync(path.join(hub, 'models--meta-llama--Llama-3.2-1B-Instruct', 'refs'));
  fs.writeFileSync(path.join(hub, 'models--meta-llama--Llama-3.2-1B-Instruct', 'refs', 'main'), 'abc123');
  const tiny = path.resolve(__dirname, '..', '..', 'models', 'tiny-llama');
  for (const f of fs.readdirSync(tiny)) if (f !== 'tqserve-testmodel.json') fs.symlinkSync(path.join(tiny, f), path.join(snap, f));
  const server = await startServer(['--base', 'llama3.2-1b', '--models-dir', hub, '--served-name', 'my-llama'], { HF_HUB_CACHE: hub });
  try {
    const h = await server.get('/health');
    expect(h.body.base.checkpoint).toBe(snap);
    expect(h.body.base.revision).toBe('abc123');
    expect(h.body.base.random_weights).toBe(false);
    expect(h.body.base.served_name).toBe('my-llama');
    expect(h.body.systemone.temperatures).toEqual({ noul: 1, choice: 1.2, score: 1.2 });
  } finally {
    await server.stop();
    fs.rmSync(hub, { recursive: true, force: true });
  }
});

test('when the engine process dies: /health 503 with the reason, other routes 503, then exit 70', async () => {
  const server = await startServer(['--exit-grace-ms', '3000']);
  const pid = (await server.get('/health')).body.base.engine_process.pid;
  const h = await killAndAwaitDeadHealth(server, pid);
  expect(h.body).toEqual({ ok: false, engine: 'dead', reason: expect.stringContaining('SIGKILL'), exit_code: 70 });
  expect(h.headers.get('retry-after')).toBe('5');
  const other = await server.post('/v1/systemone', { state: 'x', questions: { a: { type: 'noul' } } });
  expect(other.status).toBe(503);
  expect(other.body.detail).toContain('engine process exited');
  expect(other.headers.get('retry-after')).toBe('5');
  expect(other.headers.get('x-typesafe-request-id')).toMatch(/^req_/);
  expect((await server.get('/v1/models')).status).toBe(503);
  expect(await server.exited).toBe(70);
});

test('a /health call in flight when the engine dies gets the 503 report, not a 500', async () => {
  const server = await startServer(['--exit-grace-ms', '3000']);
  const pid = (await server.get('/health')).body.base.engine_process.pid;
  // The engine is busy, so the /health call's cache report waits behind this request...
  const busy = server.post('/v1/systemone', { state: longState('dying', 30000), questions: { a: { type: 'noul' } } });
  await until(async () => (await engineQueue(server.url)).busy === 1, 'the engine is busy');
  const health = server.get('/health');
  // (The cache report's place in the queue is not in /metrics: 100 ms for it to reach the engine process,
  // well inside the busy request's second or more.)
  await new Promise((r) => setTimeout(r, 100));
  // ...when the engine dies.
  process.kill(pid, 'SIGKILL');
  const h = await health;
  expect(h.status).toBe(503);
  expect(h.body).toEqual({ ok: false, engine: 'dead', reason: expect.stringContaining('SIGKILL'), exit_code: 70 });
  expect((await busy).status).toBe(503);
  expect(await server.exited).toBe(70);
});
