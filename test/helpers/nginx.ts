/**
 * Debian's nginx running deploy/nginx/tqserve.conf in front of replicas, with only the recipe's
 * ports rewritten (its listen port, and one `server` line per replica in place of 8001, 8002).
 * Free of jest: bench/replicas.ts starts it the same way as the test.
 */
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';

export const NGINX = '/usr/sbin/nginx';
const RECIPE = path.resolve(__dirname, '..', '..', 'deploy', 'nginx', 'tqserve.conf');

export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

/** The recipe with its ports rewritten; throws if the recipe no longer has the lines rewritten here. */
export function recipeFor(port: number, replicaPorts: number[]): string {
  const conf = fs.readFileSync(RECIPE, 'utf8');
  const serverLine = /^(\s*)server 127\.0\.0\.1:8001 (.*)$/m.exec(conf);
  if (!serverLine || !conf.includes('listen 127.0.0.1:8000;') || !/^\s*server 127\.0\.0\.1:8002 .*\n/m.test(conf)) throw new Error(`${RECIPE}: its listen or server lines changed`);
  const servers = replicaPorts.map((p) => `${serverLine[1]}server 127.0.0.1:${p} ${serverLine[2]}`).join('\n');
  return conf
    .replace('listen 127.0.0.1:8000;', `listen 127.0.0.1:${port};`)
    .replace(/^\s*server 127\.0\.0\.1:8002 .*\n/m, '')
    .replace(serverLine[0], servers);
}

/** nginx in the foreground with its prefix in `dir`; resolves once it answers `/ready` through a replica. */
export async function startNginx(dir: string, replicaPorts: number[]): Promise<{ url: string; process: ChildProcess; log: () => string }> {
  const port = await freePort();
  fs.writeFileSync(path.join(dir, 'nginx.conf'), recipeFor(port, replicaPorts));
  const child = spawn(NGINX, ['-p', dir, '-e', 'stderr', '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if ((await fetch(`${url}/ready`).catch(() => undefined))?.status === 200) break;
    if (child.exitCode !== null || i > 100) throw new Error(`nginx did not answer on ${url}: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, process: child, log: () => log };
}
