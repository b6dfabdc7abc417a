/**
 * Runs the real server as a child process and waits for it to listen. Free of
 * jest, so that benchmarks (bench/soak.ts) start it the same way as the tests.
 */
import { ChildProcess, execFile, spawn } from 'child_process';
import * as http from 'http';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');

/**
 * The compiled `tqserve` command (dist/, what `npm start` runs): it starts in a third of the time
 * ts-node takes to compile the server and its engine process. The tests' global set-up builds it
 * first; elsewhere (the benchmarks) `npm run build` does.
 */
export const tqserveCommand = path.join(root, 'dist', 'tqserve.js');

/**
 * Runs `tqserve decide args...` without blocking the event loop (a test holding a keep-alive
 * connection to a server must not stall past the server's idle timeout): its stdout and exit code.
 */
export function runDecide(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [tqserveCommand, 'decide', ...args], { cwd: root, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Starts `tqserve serve` with `args` (another build's dist/tqserve.js where `command` names one); listeningUrl waits until it listens. */
export function runServerProcess(args: string[], env: Record<string, string> = {}, command = tqserveCommand): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [command, 'serve', ...args], {
    cwd: root,
    // Passed explicitly: jest's sandboxed process.env is not what child_process inherits.
    // The engines measure their level again 10 s after start (server/engine-process/host.ts): not in the tests'
    // servers unless a test asks (test/kernels/level-choice.test.ts), so that no request waits behind it.
    env: { TQ_REMEASURE_LEVEL_AFTER_MS: '3600000', ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** The URL the server prints once it listens; rejects with its output if it exits first. */
export function listeningUrl(output: () => string, exited: Promise<number | null>): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = output().match(/on (http:\/\/[\d.]+:\d+)/);
      if (m) {
        clearInterval(timer);
        resolve(m[1]);
      }
    }, 50);
    exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`server exited with ${code}:\n${output()}`));
    });
  });
}

/** One request through Node's http module: any method, any body bytes, any headers, its own connection unless an agent is given. */
export function rawRequest(
  url: string,
  method: string,
  route: string,
  body?: Buffer | string,
  headers: Record<string, string> = {},
  agent?: http.Agent,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url + route, { method, headers, agent: agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A server child process and JSON calls to it through Node's http module (no client-side timeout: a registration may take minutes). */
export async function startServerProcess(args: string[]) {
  const { child, output, exited } = runServerProcess(args);
  const url = await listeningUrl(output, exited);
  const call = async (method: string, route: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await rawRequest(url, method, route, body === undefined ? undefined : JSON.stringify(body), { 'content-type': 'application/json', ...headers });
    return { status: res.status, body: JSON.parse(res.body) as any, headers: res.headers };
  };
  return {
    url,
    output,
    post: (route: string, body: unknown, headers?: Record<string, string>) => call('POST', route, body, headers),
    get: (route: string) => call('GET', route),
    delete: (route: string) => call('DELETE', route),
    stop: async () => {
      if (child.exitCode === null) child.kill();
      await exited;
    },
  };
}
