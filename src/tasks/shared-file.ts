/**
 * The cross-process side of --tasks-file, for replicas that share one file:
 *
 * - `lockTasksFile`: a lock file beside it (`<file>.lock`, created with O_EXCL), held only for the
 *   read-modify-write of one change (milliseconds: the fitting happens before), so two replicas
 *   registering at once each store on top of the other's task instead of over it. A lock left by
 *   a process that died is taken over: its holder's pid is gone (same host), or it is older than
 *   STALE_MS (any host; no write takes that long). Whoever holds the lock re-reads the file first.
 * - `watchTasksFile`: calls back when the file may have been replaced. Every writer replaces it by
 *   rename, so each version is a new inode: fs.watch on the directory reacts at once, and a stat
 *   every POLL_MS catches what fs.watch misses (network filesystems).
 *
 * The file's content hash (`contentHash`) tells a reload whether anything changed.
 */
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const STALE_MS = 10_000;
const WAIT_MS = 15_000;
const RETRY_MS = 10;
const POLL_MS = 1_000;

export const contentHash = (content: string | Buffer) => createHash('sha256').update(content).digest('hex');

interface Holder {
  host: string;
  pid: number;
}

function isStale(lockFile: string): boolean {
  let holder: Holder;
  try {
    if (Date.now() - fs.statSync(lockFile).mtimeMs > STALE_MS) return true; // even one its holder died before filling
    holder = JSON.parse(fs.readFileSync(lockFile, 'utf8'));
  } catch {
    return false; // gone, or being written: try again
  }
  if (holder.host !== os.hostname()) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Takes `<file>.lock`; resolves to the function that releases it. Throws after WAIT_MS of a live holder. */
export async function lockTasksFile(file: string): Promise<() => Promise<void>> {
  const lockFile = `${file}.lock`;
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      await fs.promises.writeFile(lockFile, JSON.stringify({ host: os.hostname(), pid: process.pid } satisfies Holder), { flag: 'wx' });
      return () => fs.promises.rm(lockFile, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (isStale(lockFile)) {
      // (Two processes taking over one stale lock at the same instant may both go on: that needs a
      // crash to have left the lock first, and costs at most one of their two changes.)
      await fs.promises.rm(lockFile, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`${lockFile} has been held by another process for more than ${WAIT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, RETRY_MS));
  }
}

/** Calls `changed` whenever `file` may have been replaced; returns the function that stops watching. */
export function watchTasksFile(file: string, changed: () => void): () => void {
  const dir = path.dirname(path.resolve(file)), name = path.basename(file);
  const identity = () => {
    try {
      const s = fs.statSync(file);
      return `${s.ino}:${s.size}:${s.mtimeMs}`;
    } catch {
      return 'missing';
    }
  };
  let last = identity();
  const check = () => {
    const now = identity();
    if (now === last) return;
    last = now;
    changed();
  };
  const watcher = fs.watch(dir, (_event, filename) => filename === name && check());
  watcher.on('error', () => undefined); // the poll still runs
  watcher.unref();
  const poll = setInterval(check, POLL_MS).unref();
  return () => {
    watcher.close();
    clearInterval(poll);
  };
}
