/** Engine work runs on its own thread: the JS thread stays responsive and calls settle in order. */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { tinyModel } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');

test('a long forward pass does not block the event loop', async () => {
  const engine = await Engine.open({ path: tinyModel('tiny-qwen2'), threads: 2 });
  try {
    const state = Array.from({ length: 6000 }, (_, i) => 100 + (i % 5000));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    const t0 = Date.now();
    const pending = engine.answer({ state, questions: [{ tokens: [1, 2, 3], labelIds: [4, 5] }] });
    const result = await pending;
    const elapsed = Date.now() - t0;
    clearInterval(timer);
    expect(result.timing.stateMs).toBeGreaterThan(50);
    // The host's planning before the steps ran is measured apart (ForwardInfo::plan_ms): a part of the call, not all of it.
    expect(result.timing.planMs).toBeGreaterThan(0);
    expect(result.timing.planMs).toBeLessThan(result.timing.stateMs);
    // A blocked loop would tick ~0 times; a free one about elapsed / 5.
    expect(ticks).toBeGreaterThan(elapsed / 5 / 4);
  } finally {
    await engine.close();
  }
});

// Queued together, each call is launched before the one before it is finished (csrc/addon/engine_thread.h): a call whose
// launch fails settles in its turn too.
test('concurrent calls all settle, in submission order, each with its own result or error, launched while the one before was unfinished', async () => {
  const engine = await Engine.open({ path: tinyModel('tiny-qwen2'), threads: 2 });
  try {
    const order: number[] = [];
    const calls = Array.from({ length: 12 }, (_, i) =>
      engine
        .answer({ state: [10 + i, 11, 12], questions: [{ tokens: i === 5 ? [-1] : [13], labelIds: [4, 5] }] })
        .then(
          (r) => (order.push(i), r.answers[0].labelLogits[0]),
          (e) => (order.push(i), e.code),
        ),
    );
    const results = await Promise.all(calls);
    expect(order).toEqual(Array.from({ length: 12 }, (_, i) => i));
    expect(results[5]).toBe('BAD_REQUEST');
    expect(typeof results[4]).toBe('number');
    expect(results[4]).not.toBe(results[6]);
    expect(engine.callsOverlapped()).toBeGreaterThan(0);
  } finally {
    await engine.close();
  }
});

test('with setBusyPoll the engine thread takes each next call without sleeping, answers alike, and still closes at once', async () => {
  const engine = await Engine.open({ path: tinyModel('tiny-qwen2'), threads: 1 });
  const ask = (i: number) => engine.answer({ state: [10 + i, 11, 12], questions: [{ tokens: [13], labelIds: [4, 5] }] });
  try {
    const before = await Promise.all([0, 1, 2].map(ask));
    // A window far longer than this test: between calls the thread spins, so it never goes to sleep again.
    engine.setBusyPoll(60_000);
    await ask(0);
    const slept = engine.threadSleeps();
    const after = [await ask(0), await ask(1), await ask(2)];
    expect(engine.threadSleeps()).toBe(slept);
    expect(after.map((r) => r.answers[0].labelLogits)).toEqual(before.map((r) => r.answers[0].labelLogits));
    expect(() => engine.setBusyPoll(-1)).toThrow(/setBusyPoll\(ms\) needs a number of milliseconds from 0 to 60000/);
    expect(() => engine.setBusyPoll('5' as unknown as number)).toThrow(/setBusyPoll/);
  } finally {
    // Closing interrupts the spin: a thread left spinning would hold close() for the window's minute.
    await engine.close();
  }
});

// On the CPU a launch computes and the device is done when it returns: the branch a GPU takes, a call arriving while the
// device runs the one before, is checked against a model of a device (test/native/engine_thread_check.cpp).
test('a call arriving while the device runs the one before is launched first; a job beside calls does not wait for them, others do', () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-thread-'));
  try {
    const exe = path.join(scratch, 'engine_thread_check');
    execFileSync('g++', ['-std=c++17', '-O1', `-I${path.join(root, 'csrc')}`, '-I/usr/include/torch/csrc/api/include', path.join(root, 'test', 'native', 'engine_thread_check.cpp'),
      path.join(root, 'csrc', 'addon', 'engine_thread.cpp'), '-lc10', '-pthread', '-o', exe], { stdio: 'pipe' });
    const out = JSON.parse(execFileSync(exe, { encoding: 'utf8' }));
    expect(out.order).toEqual(['launch a', 'launch b overlapping', 'finish a', 'beside b', 'finish b', 'after b', 'launch e', 'finish e']);
    expect(out.overlapped).toBe(1);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}, 60_000);
