/**
 * The tasks file's lock (src/tasks/shared-file.ts): one holder at a time; a lock left by a process
 * that died, or one older than 10 s (even empty), is taken over; the watcher calls back when another
 * process replaces the file. The two-replica behaviour over HTTP is in replicas-nginx.test.ts.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { lockTasksFile, watchTasksFile } from '../../src/tasks/shared-file';
import { writeAtomically } from '../../src/common/atomic-write';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-shared-file-'));
const file = path.join(dir, 'tasks.json');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test('one holder at a time: the second waits for the first to release', async () => {
  const release = await lockTasksFile(file);
  const t0 = Date.now();
  const second = lockTasksFile(file).then((r) => ({ r, waited: Date.now() - t0 }));
  await new Promise((r) => setTimeout(r, 300));
  expect(fs.existsSync(`${file}.lock`)).toBe(true);
  await release();
  const { r, waited } = await second;
  expect(waited).toBeGreaterThanOrEqual(290);
  await r();
  expect(fs.existsSync(`${file}.lock`)).toBe(false);
});

test("a lock whose holder died is taken over at once; so is an old one, even empty", async () => {
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
  fs.writeFileSync(`${file}.lock`, JSON.stringify({ host: os.hostname(), pid: Number(dead) }));
  let t0 = Date.now();
  await (await lockTasksFile(file))();
  expect(Date.now() - t0).toBeLessThan(1000);

  fs.writeFileSync(`${file}.lock`, '');
  const minuteAgo = new Date(Date.now() - 60_000);
  fs.utimesSync(`${file}.lock`, minuteAgo, minuteAgo);
  t0 = Date.now();
  await (await lockTasksFile(file))();
  expect(Date.now() - t0).toBeLessThan(1000);
});

test('the watcher calls back when the file is replaced, not when it is left alone', async () => {
  await writeAtomically(file, '{"tasks":[]}');
  let calls = 0;
  const stop = watchTasksFile(file, () => calls++);
  try {
    await new Promise((r) => setTimeout(r, 1500));
    expect(calls).toBe(0);
    await writeAtomically(file, '{"tasks":[],"x":1}');
    for (let i = 0; i < 30 && calls === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(calls).toBeGreaterThanOrEqual(1);
  } finally {
    stop();
  }
});
