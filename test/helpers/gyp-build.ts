/**
 * The node-gyp build of binding.gyp that test/project/binding-gyp.test.ts checks. The set-up makes it once
 * (scripts/gyp-build.js, into build-gyp/), and the test uses that build while the sources are unchanged. Otherwise
 * (sources edited since) it compiles every engine source at -O3 (two to three minutes on 2 cores), so the global
 * set-up starts it in the background at the
 * lowest CPU priority (nice 19) when that test is selected, and the test-sequencer runs that test
 * last: the compile uses the cycles the other suites leave idle (waiting on servers and engine
 * processes) instead of two minutes of its own. The test then waits for it; run alone, it waits
 * for the whole build as before.
 *
 * nice alone did not do it: the build is detached (its own session, so that its process group can be
 * killed), and with the kernel's autogroup scheduling (sched_autogroup_enabled, on here) a new session
 * is a new scheduling group, which shares the CPU equally with jest's whatever its processes' nice.
 * The build's shell therefore sets its group's nice to 19 (/proc/self/autogroup). Measured on 2 cores,
 * five server suites with the build beside them: 72 s without that, 38 s with it, 44 s with no build.
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
// The build's staging, command and stamp, shared with the set-up's build (plain JavaScript: scripts/ is not compiled).
// eslint-disable-next-line @typescript-eslint/no-var-requires
const gyp = require(path.join(root, 'scripts', 'gyp-build.js')) as {
  prebuiltDir: string; stage(dir: string): void; gypCommand(dir: string): string[]; freshPrebuilt(): string | null;
};
export const gypTestFile = path.join(root, 'test', 'project', 'binding-gyp.test.ts');
/** Where the global set-up tells the test (and the teardown) which build it started. */
export const GYP_BUILD_ENV = 'TQ_GYP_BUILD_DIR';

/**
 * The node-gyp build to test: the one made at set-up (scripts/gyp-build.js: build-gyp/) while the sources are
 * unchanged, else a new one started in the background; returns its folder.
 */
export function startGypBuild(): string {
  return gyp.freshPrebuilt() ?? startBackgroundBuild();
}

/** Copies what node-gyp needs into a scratch folder and starts the build there; returns the folder. */
function startBackgroundBuild(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-gyp-'));
  gyp.stage(dir);
  // The exit status is written by the shell, so it is there even if no JavaScript is left to listen.
  const script = `(echo 19 > /proc/self/autogroup) 2>/dev/null; nice -n 19 "$@" > build.log 2>&1; echo $? > status.tmp && mv status.tmp status`;
  const child = spawn('bash', ['-c', script, 'gyp', ...gyp.gypCommand(dir)], { cwd: dir, stdio: 'ignore', detached: true });
  fs.writeFileSync(path.join(dir, 'pid'), String(child.pid));
  child.unref();
  return dir;
}

/** Waits (without blocking the event loop) until the build in `dir` ends; its addon's path, or an error with its log. */
export async function finishedGypBuild(dir: string): Promise<string> {
  const status = path.join(dir, 'status');
  while (!fs.existsSync(status)) await new Promise((r) => setTimeout(r, 500));
  const code = Number(fs.readFileSync(status, 'utf8'));
  if (code !== 0) throw new Error(`node-gyp rebuild exited with ${code}:\n${fs.readFileSync(path.join(dir, 'build.log'), 'utf8').slice(-4000)}`);
  return path.join(dir, 'build', 'Release', 'tqserve_engine.node');
}

/** Stops the build if it still runs (its whole process group) and removes its folder; the set-up's build stays. */
export function removeGypBuild(dir: string) {
  if (path.resolve(dir) === gyp.prebuiltDir) return;
  const pidFile = path.join(dir, 'pid');
  if (fs.existsSync(pidFile) && !fs.existsSync(path.join(dir, 'status'))) {
    try {
      process.kill(-Number(fs.readFileSync(pidFile, 'utf8')), 'SIGKILL');
    } catch {
      // already gone
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
