/** Starts the real server as a child process on a free port and talks to it over HTTP. */
import { ChildProcess } from 'child_process';
import { listeningUrl, rawRequest, runDecide, runServerProcess } from './server-process';

export { rawRequest, runDecide, runServerProcess };

export interface RunningServer {
  url: string;
  process: ChildProcess;
  log: () => string;
  post: (route: string, body: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any; headers: Headers }>;
  get: (route: string) => Promise<{ status: number; body: any; headers: Headers }>;
  delete: (route: string) => Promise<{ status: number; body: any; headers: Headers }>;
  stop: () => Promise<void>;
  exited: Promise<number | null>;
}

export async function startServer(args: string[] = [], env: Record<string, string> = {}): Promise<RunningServer> {
  const { child, output, exited } = runServerProcess(['--port', '0', '--base', 'tiny-qwen3', '--dtype', 'fp32', ...args], env);
  const url = await listeningUrl(output, exited);
  const call = async (method: string, route: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(url + route, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  return {
    url,
    process: child,
    log: output,
    post: (route, body, headers) => call('POST', route, body, headers),
    get: (route) => call('GET', route),
    delete: (route) => call('DELETE', route),
    stop: async () => {
      if (child.exitCode === null) child.kill();
      await exited;
    },
    exited,
  };
}

/**
 * A server for a test file: started before its tests, stopped after them. The object is filled in
 * when the server has started (use it inside tests and hooks, not at the file's top level).
 */
export function serverForFile(args: string[] = [], env: Record<string, string> = {}): RunningServer {
  const server = {} as RunningServer;
  beforeAll(async () => {
    Object.assign(server, await startServer(args, env));
  });
  afterAll(() => server.stop?.());
  return server;
}

/** Kills an engine process and polls /health until it answers 503 (at most 2 s); returns that answer. */
export async function killAndAwaitDeadHealth(server: RunningServer, pid: number) {
  process.kill(pid, 'SIGKILL');
  let h = await server.get('/health');
  for (let i = 0; i < 100 && h.status !== 503; i++) {
    await new Promise((r) => setTimeout(r, 20));
    h = await server.get('/health');
  }
  expect(h.status).toBe(503);
  return h;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace jest {
    interface Expect {
      closeToValue(v: number): any;
    }
  }
}
expect.extend({
  closeToValue(received: number, v: number) {
    const pass = Math.abs(received - v) < 1e-9;
    return { pass, message: () => `expected ${received} to be within 1e-9 of ${v}` };
  },
});

/**
 * Answers equal up to 1e-6 in every probability: a repeated state comes from
 * the prefix cache, whose results may differ from a cold run in the last bits.
 */
export function expectSameAnswers(a: Record<string, any>, b: Record<string, any>, tolerance = 1e-6) {
  expect(Object.keys(a)).toEqual(Object.keys(b));
  for (const name of Object.keys(a)) {
    const [x, y] = [a[name], b[name]];
    expect(x.type).toBe(y.type);
    const numbers = (o: any) => [o.noul, o.score, o.confidence, ...Object.values(o.probabilities ?? {})].filter((v) => v !== undefined) as number[];
    const [nx, ny] = [numbers(x), numbers(y)];
    expect(nx.length).toBe(ny.length);
    nx.forEach((v, i) => expect(Math.abs(v - ny[i])).toBeLessThanOrEqual(tolerance));
    if (x.choice !== undefined) expect(x.choice).toBe(y.choice);
  }
}

/** A 422 body in the format's validation form: `detail` lists problems, each with `loc` (from "body"), `msg` and `type`. */
export function expectProblems(body: any) {
  expect(Array.isArray(body.detail)).toBe(true);
  expect(body.detail.length).toBeGreaterThan(0);
  for (const p of body.detail) {
    expect(p.loc[0]).toMatch(/^(body|header)$/);
    expect(typeof p.msg).toBe('string');
    expect(p.msg.length).toBeGreaterThan(5);
    expect(typeof p.type).toBe('string');
  }
}

/** Any error body as text: a string `detail`, or its problems as "loc: msg" (as the official clients print them). */
export function detailText(body: any): string {
  return typeof body.detail === 'string' ? body.detail : body.detail.map((p: any) => `${p.loc.join('.')}: ${p.msg}`).join('; ');
}

/**
 * The text engine process's queue as the server's /metrics reports it (answered at once, never behind
 * the engine): whether a call is being computed, and how many wait.
 */
export async function engineQueue(url: string): Promise<{ busy: number; queued: number }> {
  const text = await (await fetch(url + '/metrics')).text();
  const value = (name: string) => Number(new RegExp(`^${name}\\{engine="text"\\} (\\S+)$`, 'm').exec(text)?.[1]);
  return { busy: value('tqserve_engine_busy'), queued: value('tqserve_engine_queue_depth') };
}

/**
 * Waits (polling every 10 ms, at most a minute) until ok() holds. Tests wait on the server's own state
 * this way rather than on a clock: fixed sleeps broke on machines faster or slower than the one they were
 * written on.
 */
export async function until(ok: () => Promise<boolean>, what: string) {
  for (const t0 = Date.now(); !(await ok()); await new Promise((r) => setTimeout(r, 10)))
    if (Date.now() - t0 > 60_000) throw new Error(`gave up waiting until ${what}`);
}
