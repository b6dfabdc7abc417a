/**
 * bench/gpu/kernel_counters.py reads Nsight Compute's CSV (one row per kernel launch and metric, ncu's own lines
 * between them, durations in the unit ncu chose, thousands separated by commas) into one entry per launch, in launch
 * order: what the window's counters step reports of our kernels' limits. The GPU run is the window's.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { debianPython, pythonEnv } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');

const header = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"';
const row = (id: number, kernel: string, metric: string, unit: string, value: string) =>
  `"${id}","4242","tq_cli","127.0.0.1","${kernel}","1","7","(128, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","${metric}","${unit}","${value}"`;
const norm = 'tq::cuda::(anonymous namespace)::add_rms_norm_kernel(tq::rows::AddRmsNormArgs)';
const gemm = 'nvjet_sm90_tst_256x160_64x4_1x2_h_bz_coopA_TNT';

test('kernel_counters.py reads ncu\'s CSV into one entry per launch, in launch order, durations in µs', () => {
  const csv = [
    '==PROF== Connected to process 4242 (/work/build/tq_cli)',
    header,
    row(1, gemm, 'gpu__time_duration.sum', 'msecond', '1.25'),
    row(1, gemm, 'sm__throughput.avg.pct_of_peak_sustained_elapsed', '%', '71.3'),
    row(0, norm, 'gpu__time_duration.sum', 'usecond', '69.12'),
    '==PROF== Profiling "add_rms_norm_kernel" - 1: 0%....50%....100% - 9 passes',
    row(0, norm, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed', '%', '58.4'),
    row(0, norm, 'launch__grid_size', '', '16,384'),
    row(0, norm, 'launch__registers_per_thread', 'register/thread', '32'),
    row(0, norm, 'smsp__not_asked_for', '', '1'),
    row(1, gemm, 'gpu__time_duration.sum', 'nsecond', '1,250,000'),
  ].join('\n');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tq-ncu-')), 'counters.csv');
  fs.writeFileSync(file, csv);
  const launches = JSON.parse(execFileSync('python3', [path.join(root, 'bench', 'gpu', 'kernel_counters.py'), '--parse', file], { encoding: 'utf8' }));
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
  expect(launches).toEqual([
    { kernel: norm, us: 69.12, memory_pct: 58.4, blocks: 16384, registers: 32 },
    { kernel: gemm, us: 1250, sm_pct: 71.3 },
  ]);
});

test("kernel_counters.py reads why a kernel waits (the split-key kernel's): its stall reasons, issue rate and occupancy's limits, the largest stalls named first", () => {
  const split = 'void tq::cuda::(anonymous namespace)::split_key_kernel<unsigned short, 2>(tq::split_key::SplitKeyLaunch)';
  const stall = (reason: string, pct: string) => row(0, split, `smsp__warp_issue_stalled_${reason}_per_warp_active.pct`, '%', pct);
  const csv = [header, row(0, split, 'gpu__time_duration.sum', 'usecond', '40.5'), stall('long_scoreboard', '12.5'), stall('barrier', '61.0'),
    stall('short_scoreboard', '20.25'), stall('wait', '3'), row(0, split, 'smsp__issue_active.avg.pct_of_peak_sustained_active', '%', '9.5'),
    row(0, split, 'launch__occupancy_limit_registers', 'block', '2'), row(0, split, 'smsp__inst_executed.sum', 'inst', '1,234,567')].join('\n');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-ncu-'));
  fs.writeFileSync(path.join(dir, 'why.csv'), csv);
  const script = `import sys, json; sys.path.insert(0, ${JSON.stringify(path.join(root, 'bench', 'gpu'))}); import kernel_counters as k; ` +
    `l = k.parse(open(${JSON.stringify(path.join(dir, 'why.csv'))}).read()); print(json.dumps({"launches": l, "top": k.top_stalls(l[0], 2), "md": k.markdown(l)}))`;
  const out = JSON.parse(execFileSync('python3', ['-c', script], { encoding: 'utf8' }));
  fs.rmSync(dir, { recursive: true, force: true });
  expect(out.launches).toEqual([{ kernel: split, us: 40.5, stalls: { long_scoreboard: 12.5, barrier: 61, short_scoreboard: 20.25, wait: 3 }, issue_pct: 9.5,
    blocks_by_registers: 2, instructions: 1234567 }]);
  expect(out.top).toBe('barrier 61%, short_scoreboard 20%');
  expect(out.md).toContain('| 0 | barrier 61%, short_scoreboard 20%, long_scoreboard 12%, wait 3% | 9.5 | - | 2 / - / - | 1234567 | - |');
  expect(out.md).toContain('| 0 | `split_key_kernel<unsigned short, 2>` | 40.5 |');
});

test('kernel_counters.py names a kernel by its function (the anonymous namespace, return type and parameters left out) and its short template arguments', () => {
  const names = [norm, 'void tq::cuda::(anonymous namespace)::few_rows_mma_kernel<2, 2, 6>(tq::few_rows_mma::Args)', gemm,
    'void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true>(Flash_fwd_params)'];
  const script = `import sys, json; sys.path.insert(0, ${JSON.stringify(path.join(root, 'bench', 'gpu'))}); import kernel_counters as k; ` +
    `print(json.dumps([k.short_name(n) for n in json.loads(sys.argv[1])]))`;
  expect(JSON.parse(execFileSync('python3', ['-c', script, JSON.stringify(names)], { encoding: 'utf8' }))).toEqual([
    'add_rms_norm_kernel', 'few_rows_mma_kernel<2, 2, 6>', gemm, 'flash_fwd_kernel<…>']);
});

test("where this ncu lacks a metric of why a kernel waits, kernel_counters.py measures that call again without them and says why", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-ncu-'));
  // An ncu that refuses the stall metrics, as one without them would, and otherwise writes one launch's duration.
  const ncu = path.join(dir, 'ncu');
  fs.writeFileSync(ncu, ['#!/bin/bash', 'while [ $# -gt 0 ]; do case "$1" in --log-file) log=$2; shift;; --metrics) metrics=$2; shift;; esac; shift; done',
    'case "$metrics" in *stalled*) echo "==ERROR== Failed to find metric smsp__warp_issue_stalled_barrier_per_warp_active.pct" >&2; exit 1;; esac',
    `printf '%s\\n' '${header}' '${row(0, gemm, 'gpu__time_duration.sum', 'usecond', '7.5')}' > "$log"`].join('\n'), { mode: 0o755 });
  const script = `import sys, json, types; sys.path.insert(0, ${JSON.stringify(path.join(root, 'bench', 'gpu'))}); import kernel_counters as k; ` +
    `a = types.SimpleNamespace(ncu=${JSON.stringify(ncu)}, out=${JSON.stringify(dir)}, cli="tq_cli", timeout=10); ` +
    `print(json.dumps(k.counters(a, "split", [[]], [], "regex:split_key_kernel", 2, True)))`;
  const r = JSON.parse(execFileSync('python3', ['-c', script], { encoding: 'utf8' }));
  fs.rmSync(dir, { recursive: true, force: true });
  expect(r.launches).toEqual([{ kernel: gemm, us: 7.5 }]);
  expect(r.why_error).toContain('Failed to find metric');
});

test('kernel_counters.py builds its calls from the bench model as the profile does: a cold 1,000-token prefill without graphs, its attention in its graph, the split-key kernel on a question over its state, `down` on 24 rows in each form, the throughput call', () => {
  const out = execFileSync(debianPython, [path.join(root, 'bench', 'gpu', 'kernel_counters.py'), '--dry-run', '--models', path.join(root, 'models'), '--bench-model', 'tiny-qwen3', '--states', '2'],
    { encoding: 'utf8', env: pythonEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const calls = JSON.parse(out);
  expect(Object.keys(calls)).toEqual(['cold-1000', 'cold-1000-graph-attention', 'split-key-24-over-1000', 'down-24-rows-gemm-forms', 'throughput-2x1001']);
  // `down` on 24 rows through tq_cli's probe, each GEMM once: the cold state's, cuBLAS's on the rows, our four tilings; why they wait.
  expect(calls['down-24-rows-gemm-forms']).toMatchObject({ requests: 0, count: 6, why: true, kernels: 'regex:few_rows_mma|xmma|nvjet|gemm',
    flags: ['gemm-rows', '--device', 'cuda', '--rows', '24', '--shapes', '1024x3072', '--time', 'off'] });
  expect(calls['cold-1000']).toMatchObject({ requests: 1, tokens: 1000, count: 14 });
  // The same prefill's attention in its CUDA graph (the fixed form), the first layer's two launches.
  expect(calls['cold-1000-graph-attention']).toMatchObject({ requests: 1, tokens: 1000, kernels: 'regex:flash_fwd', count: 2 });
  const graphed: string[] = calls['cold-1000-graph-attention'].flags;
  expect(graphed[graphed.lastIndexOf('--cuda-graphs') + 1]).toBe('on');
  // The split-key kernel alone, its first two launches: the first layer's and the second's, a 24-token question's tiers.
  // And why it waits (its stall reasons: WHY_METRICS), that call alone.
  expect(calls['split-key-24-over-1000']).toMatchObject({ requests: 1, tokens: 1024, kernels: 'regex:split_key_kernel', count: 2, why: true });
  expect([calls['cold-1000'].why, calls['cold-1000-graph-attention'].why, calls['throughput-2x1001'].why]).toEqual([false, false, false]);
  const split: string[] = calls['split-key-24-over-1000'].flags;
  expect(split[split.lastIndexOf('--state-attention') + 1]).toBe('split-key');
  expect(split[split.lastIndexOf('--cuda-graphs') + 1]).toBe('off');
  expect(calls['throughput-2x1001']).toMatchObject({ requests: 2, tokens: 2002 });
  // tq_cli takes a flag's last value: the cold call runs without graphs, every kernel launched where ncu sees it.
  const cold: string[] = calls['cold-1000'].flags;
  expect(cold[cold.lastIndexOf('--cuda-graphs') + 1]).toBe('off');
  for (const [name, flags] of Object.entries(calls) as [string, { flags: string[] }][])
    if (name !== 'down-24-rows-gemm-forms') expect(flags.flags).toEqual(expect.arrayContaining(['--device', 'cuda', '--prefix-cache', 'off']));
}, 60_000);
