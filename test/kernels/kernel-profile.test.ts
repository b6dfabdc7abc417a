/**
 * bench/gpu/kernel_profile.py's GPU form, which only a GPU window's traces reach, on a trace written here in Kineto's
 * format: two calls, kernels launched directly and from a CUDA graph, a copy, a gap. Its CPU form runs on real traces in
 * test/engine/cli.test.ts.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { debianPython } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-kernel-profile-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const X = (cat: string, name: string, ts: number, dur: number, args: Record<string, unknown> = {}) => ({ ph: 'X', cat, name, ts, dur, pid: 0, tid: 1, args });
const trace = {
  traceEvents: [
    // Call 0, 0-100 µs: two launches of one kernel template (two instances), a copy, then a graph of two kernels.
    X('user_annotation', 'tq_cli call 0', 0, 100),
    X('cuda_runtime', 'cudaLaunchKernel', 5, 2, { correlation: 1 }),
    X('kernel', 'void tq::cuda::(anonymous namespace)::qk_norm_rope_kernel(tq::rows::QkNormRopeArgs)', 10, 20, { correlation: 1 }),
    X('cuda_runtime', 'cudaLaunchKernel', 8, 2, { correlation: 2 }),
    X('kernel', 'void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int)', 30, 5, { correlation: 2 }),
    X('cuda_runtime', 'cudaMemcpyAsync', 9, 1, { correlation: 3 }),
    X('overhead', 'Activity Buffer Request', 11, 4),
    X('gpu_memcpy', 'Memcpy HtoD (Pinned -> Device)', 35, 5, { correlation: 3 }),
    X('cuda_runtime', 'cudaGraphLaunch', 40, 3, { correlation: 4 }),
    X('kernel', 'void tq::cuda::(anonymous namespace)::qk_norm_rope_kernel(tq::rows::QkNormRopeArgs)', 60, 10, { correlation: 4 }),
    X('kernel', 'void at::native::vectorized_gather_kernel<8, int>(char*, char*, long*, int)', 70, 10, { correlation: 4 }),
    // Call 1, 200-250 µs: one kernel.
    X('user_annotation', 'tq_cli call 1', 200, 50),
    X('cuda_runtime', 'cudaLaunchKernel', 205, 2, { correlation: 5 }),
    X('overhead', 'Activity Buffer Request', 220, 6),
    X('kernel', 'nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT', 210, 30, { correlation: 5 }),
    // Attention: two launches of one grid, one of another (a kernel's grid and block as Kineto records them).
    X('cuda_runtime', 'cudaLaunchKernel', 206, 1, { correlation: 6 }),
    X('kernel', 'void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, false>(Flash_fwd_params)', 241, 4, { correlation: 6, grid: [8, 5, 16], block: [128, 1, 1] }),
    X('kernel', 'void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, false>(Flash_fwd_params)', 245, 2, { correlation: 6, grid: [8, 5, 16], block: [128, 1, 1] }),
    X('kernel', 'void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, false>(Flash_fwd_params)', 247, 1, { correlation: 6, grid: [1, 7, 16], block: [128, 1, 1] }),
  ],
};

test('kernel_profile.py ranks each call\'s kernels, and measures busy time, gaps, graph time and the profiler\'s own from Kineto\'s events', () => {
  const file = path.join(scratch, 'trace.json');
  const summaryFile = path.join(scratch, 'summary.json');
  fs.writeFileSync(file, JSON.stringify(trace));
  const printed = execFileSync(debianPython, [path.join(root, 'bench', 'gpu', 'kernel_profile.py'), file, '--layers', '2', '--json', summaryFile], { encoding: 'utf8' });
  const s = JSON.parse(fs.readFileSync(summaryFile, 'utf8'));
  expect(s.device).toBe('cuda');
  const c0 = s.calls['0'];
  // Instances of one template count together; "(anonymous namespace)" is part of the name, the parameters are not.
  expect(c0.top.map((k: any) => [k.name, k.us, k.count, k.per_layer])).toEqual([
    ['tq::cuda::(anonymous namespace)::qk_norm_rope_kernel', 30, 2, 1],
    ['at::native::vectorized_gather_kernel<…>', 15, 2, 1],
    ['Memcpy HtoD ', 5, 1, 0.5],
  ]);
  expect(c0.gpu_busy_us).toBe(50);  // 10-40 and 60-80
  expect(c0.wall_us).toBe(100);
  expect(c0.idle_before_first_us).toBe(10);
  expect(c0.gaps_between).toEqual({ count: 1, total_us: 20, largest_us: 20 });
  // Kernels back to back leave no gap; one a microsecond after the last is a short gap (a launch's own latency).
  expect(c0.short_gaps).toEqual({ count: 0, total_us: 0 });
  expect(s.calls['1'].short_gaps).toEqual({ count: 1, total_us: 1 });
  expect(c0.idle_after_last_us).toBe(20);
  expect(c0.in_graphs_us).toBe(20);
  expect(c0.outside_graphs_us).toBe(30);
  expect(c0.launch_calls).toBe(4);
  // The profiler's own time on the host and the graph launch's, each call's alone.
  expect([c0.profiler_overhead_us, c0.graph_launch_host_us]).toEqual([4, 3]);
  expect([s.calls['1'].profiler_overhead_us, s.calls['1'].graph_launch_host_us]).toEqual([6, 0]);
  expect(s.calls['1'].top[0]).toEqual(expect.objectContaining({ name: 'nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT', us: 30, count: 1 }));
  // The attention kernels' grids: each grid's launches and their median; none in a call without attention.
  expect(c0.attention_grids).toEqual([]);
  expect(s.calls['1'].attention_grids).toEqual([
    { name: 'pytorch_flash::flash_fwd_kernel<…>', grid: [8, 5, 16], block: [128, 1, 1], count: 2, median_us: 3 },
    { name: 'pytorch_flash::flash_fwd_kernel<…>', grid: [1, 7, 16], block: [128, 1, 1], count: 1, median_us: 1 },
  ]);
  expect(printed).toContain('| `pytorch_flash::flash_fwd_kernel<…>` | 8 x 5 x 16 | 128 x 1 x 1 | 2 | 3.0 µs |');
  expect(printed).toMatch(/call 0: wall 0\.100 ms, GPU busy 0\.050 ms \(50%\)/);
  expect(printed).toContain('between (1 gaps over 5 µs) 0.020 ms (largest 0.020 ms) and 0 shorter ones 0.000 ms in all, after the last 0.020 ms');
  expect(printed).toContain("the profiler's own 0.004 ms, the host in cudaGraphLaunch 0.003 ms");
  expect(printed).toContain('| `tq::cuda::(anonymous namespace)::qk_norm_rope_kernel` | 30.0 µs | 60.0% | 2 | 1.00 |');
});

test('kernel_profile.py refuses a trace without tq_cli\'s call scopes, saying so', () => {
  const file = path.join(scratch, 'bare.json');
  fs.writeFileSync(file, JSON.stringify({ traceEvents: [X('kernel', 'k', 0, 1)] }));
  expect(() => execFileSync(debianPython, [path.join(root, 'bench', 'gpu', 'kernel_profile.py'), file], { stdio: 'pipe' })).toThrow(/no 'tq_cli call N' scope/);
});
