/**
 * Engines sharing a CUDA device's memory (src/server/engine-process/device-shares.ts), on their own: the device's first
 * engine takes utilization / k of what it finds free and starts alone; the others follow with its budget by size; an
 * engine alone on its device, on the CPU, or sized by --cache-mib starts as given. (No GPU here: the engines' own sizing
 * by device memory is CUDA's, docs/gpu.md.)
 */
import { NativeEngineInfo } from '../../src/engine/native';
import { deviceShares, sizedAs } from '../../src/server/engine-process/device-shares';
import { HostArgs } from '../../src/server/engine-process/protocol';

const engine = (device: string, load: Partial<HostArgs['load']> = {}): HostArgs => ({
  load: { path: 'models/tiny-qwen3', device, gpuMemoryUtilization: 0.9, cacheMiB: 0, ...load },
  batchTokens: 4096,
  busyPollMs: 20,
  callsInFlight: 2,
});

test('k engines on one CUDA device: the first takes utilization / k and starts alone, the others follow it; other devices start as given', () => {
  const plan = deviceShares([engine('cuda:0'), engine('cuda:1'), engine('cuda:0'), engine('cuda:0'), engine('cuda:2')]);
  expect(plan.map((s) => s.follows)).toEqual([undefined, undefined, 0, 0, undefined]);
  expect(plan.map((s) => s.args.load.gpuMemoryUtilization)).toEqual([0.3, 0.9, 0.9, 0.9, 0.9]);
  expect(deviceShares([engine('cuda'), engine('cuda')]).map((s) => [s.follows, s.args.load.gpuMemoryUtilization])).toEqual([[undefined, 0.45], [0, 0.9]]);
});

test('the head and image engines beside the serving one on its GPU count among its k and follow it; on a device of their own, the first of them leads', () => {
  const beside = deviceShares([engine('cuda:0'), { load: engine('cuda:0').load }, { load: engine('cuda:0').load }]);
  expect(beside.map((s) => [s.follows, s.args.load.gpuMemoryUtilization])).toEqual([[undefined, 0.3], [0, 0.9], [0, 0.9]]);
  const apart = deviceShares([engine('cuda:0'), { load: engine('cuda:1').load }, { load: engine('cuda:1').load }]);
  expect(apart.map((s) => [s.follows, s.args.load.gpuMemoryUtilization])).toEqual([[undefined, 0.9], [undefined, 0.45], [1, 0.9]]);
});

test('engines sized otherwise start together, as given: on the CPU, with --cache-mib, or by the context', () => {
  for (const args of [[engine('cpu'), engine('cpu')], [engine('cuda', { cacheMiB: 4096 }), engine('cuda', { cacheMiB: 4096 })], [engine('cuda', { gpuMemoryUtilization: 0 }), engine('cuda', { gpuMemoryUtilization: 0 })]]) {
    const plan = deviceShares(args);
    expect(plan.map((s) => s.follows)).toEqual([undefined, undefined]);
    expect(plan.map((s) => s.args)).toEqual(args);
  }
});

test("a follower takes the first engine's budget in whole MiB, never more than it took", () => {
  const first = { cacheBytes: 61_203_472_384 + 12_345 } as NativeEngineInfo;
  const sized = sizedAs(engine('cuda:0'), first);
  expect(sized.load.cacheMiB).toBe(Math.floor(first.cacheBytes / 2 ** 20));
  expect(sized.load.cacheMiB! * 2 ** 20).toBeLessThanOrEqual(first.cacheBytes);
  expect({ ...sized.load, cacheMiB: 0 }).toEqual(engine('cuda:0').load);
});
