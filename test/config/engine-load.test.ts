/**
 * A flag the engine takes travels by one table (src/config/flags.ts, each row's `engine`) to the engine's load
 * options, and the addon reads each of them by name (csrc/addon/js_values.cpp reads every option
 * csrc/engine/named_fields.h names): a flag whose option the engine would not read fails here, never silently ignored.
 */
import * as fs from 'fs';
import * as path from 'path';
import { ResolvedBase } from '../../src/config/bases';
import { engineLoad } from '../../src/config/engine-load';
import { busyPollMs, callsInFlight, flagDefs, parseFlags } from '../../src/config/flags';

const root = path.resolve(__dirname, '..', '..');
const base = { checkpoint: '/models/x' } as ResolvedBase;

test('every engine flag names a load option the addon reads', () => {
  const fields = fs.readFileSync(path.join(root, 'csrc/engine/named_fields.h'), 'utf8');
  const read = new Set(Array.from(fields.matchAll(/visit\("(\w+)"/g), (m) => m[1]));
  expect(fs.readFileSync(path.join(root, 'csrc/addon/js_values.cpp'), 'utf8')).toMatch(/for_each_engine_option\(opts, .*reader\.read\(name, field\)/);
  const engineFlags = flagDefs.filter((d) => d.engine);
  expect(engineFlags.length).toBeGreaterThan(10);
  expect(engineFlags.filter((d) => !read.has(d.engine!)).map((d) => d.name)).toEqual([]);
});

test("engineLoad carries each engine flag's value, on/off as booleans, and leaves unset ones to the engine", () => {
  const flags = parseFlags([
    '--dtype', 'fp32', '--threads', '3', '--prefix-cache', 'off', '--batch-invariant', 'off', '--arithmetic', 'native',
    '--quantization', 'int8', '--attention', 'cascade', '--cuda-forward', 'aten', '--cuda-graphs', 'on', '--device', 'cuda:1',
    '--register-boundary', 'before', '--cache-mib', '64', '--gpu-memory-utilization', '0.5',
  ]);
  expect(engineLoad(flags, base)).toEqual({
    path: '/models/x', dtype: 'fp32', threads: 3, prefixCache: false, batchInvariant: false, arithmetic: 'native', quantization: 'int8',
    attention: 'cascade', kernels: 'aten', cudaGraphs: true, device: 'cuda:1', registerBoundary: 'before', cacheMiB: 64, gpuMemoryUtilization: 0.5,
  });
  const defaults = engineLoad(parseFlags([]), base);
  expect(defaults).toMatchObject({ dtype: 'bf16', prefixCache: true, batchInvariant: true, threads: expect.any(Number) });
  expect(defaults.threads).toBeGreaterThan(0);
  for (const byDevice of ['attention', 'kernels', 'cudaGraphs']) expect(defaults).not.toHaveProperty(byDevice);
});

test("a choice's older name is read as its new one, and a name of neither is refused with the choices listed", () => {
  expect(parseFlags(['--attention', 'kernels']).attention).toBe('direct');
  expect(parseFlags(['--attention', 'direct']).attention).toBe('direct');
  expect(() => parseFlags(['--attention', 'plain'])).toThrow(/--attention must be one of direct, cascade, got "plain"/);
});

test('the channel spins by default beside a GPU, never where the CPU computes; --busy-poll-ms says otherwise, 0 or more', () => {
  expect(busyPollMs(parseFlags([]))).toBe(0);
  expect(busyPollMs(parseFlags(['--device', 'cuda:0,cuda:1']))).toBeGreaterThan(0);
  expect(busyPollMs(parseFlags(['--device', 'cuda', '--busy-poll-ms', '0']))).toBe(0);
  expect(busyPollMs(parseFlags(['--busy-poll-ms', '2.5']))).toBe(2.5);
  expect(() => parseFlags(['--busy-poll-ms', '-1'])).toThrow(/--busy-poll-ms must be from 0 to 60000/);
  expect(() => parseFlags(['--busy-poll-ms', '60001'])).toThrow(/--busy-poll-ms must be from 0 to 60000/);
});

test('two calls in flight by default beside a GPU, one where the CPU computes; --calls-in-flight says otherwise, 1 or 2', () => {
  expect(callsInFlight(parseFlags([]))).toBe(1);
  expect(callsInFlight(parseFlags(['--device', 'cuda']))).toBe(2);
  expect(callsInFlight(parseFlags(['--device', 'cuda:0,cuda:1', '--calls-in-flight', '1']))).toBe(1);
  expect(callsInFlight(parseFlags(['--calls-in-flight', '2']))).toBe(2);
  for (const bad of ['0', '3', '1.5']) expect(() => parseFlags(['--calls-in-flight', bad])).toThrow(/--calls-in-flight must be 1 or 2/);
});
