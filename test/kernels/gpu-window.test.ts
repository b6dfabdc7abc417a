/**
 * The GPU window's command (bench/gpu/run.sh, bench/gpu/window.py; docs/gpu.md, "The window") in its CPU form, as
 * CI proves it before a GPU is lent: every step runs (on the test models, with the real tq_cli, server and float64
 * reference), OUT holds the tarball and its summary only, and the tarball holds every step's results. And a run
 * killed mid-way (the whole process group, SIGKILL: what the device's time limit does) leaves a whole tarball with
 * the results of the steps it finished.
 */
import { ChildProcess, execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { debianPython, pythonEnv } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-window-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

function window(name: string, args: string[], env: NodeJS.ProcessEnv = {}): { child: ChildProcess; out: string; done: Promise<number | null>; log: () => string } {
  const out = path.join(scratch, name, 'out');
  const work = path.join(scratch, name, 'work');
  let log = '';
  const child = spawn('bash', [path.join(root, 'bench', 'gpu', 'run.sh'), out, '--device', 'cpu', '--work', work, ...args], {
    env: { ...pythonEnv(), PYTHON: debianPython, ...env },
    detached: true, // its own process group, which the kill test stops whole
  });
  child.stdout!.on('data', (d) => (log += d));
  child.stderr!.on('data', (d) => (log += d));
  const done = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, done, log: () => log };
}

/** The tarball's files, unpacked into a fresh folder; undefined while there is none. */
function unpack(out: string, into: string): Record<string, string> | undefined {
  const tarball = path.join(out, 'gpu.tgz');
  if (!fs.existsSync(tarball)) return undefined;
  fs.rmSync(into, { recursive: true, force: true });
  fs.mkdirSync(into, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', into]);
  return Object.fromEntries(fs.readdirSync(into).map((f) => [f, fs.readFileSync(path.join(into, f), 'utf8')]));
}

test('the CPU form runs every step and packs each step\'s results into OUT/gpu.tgz, with nothing else in OUT but its summary', async () => {
  const run = window('whole', ['--short', '--families', 'tiny-qwen3']);
  expect(await run.done).toBe(0);
  expect(fs.readdirSync(run.out).sort()).toEqual(['gpu.tgz', 'summary.md']);
  const files = unpack(run.out, path.join(scratch, 'whole', 'unpacked'))!;
  const steps = JSON.parse(files['window.json']).steps;
  expect(steps.map((s: any) => `${s.step} ${s.status}`)).toEqual(['preflight ok', 'build ok', 'models ok', 'profile ok', 'bench ok', 'invariance ok',
    'selfcheck ok', 'serve ok', 'counters skipped', 'probes skipped', 'rest ok', 'serve-engines ok']);
  // None cut by the budget (what a --resume would run again).
  expect(steps.filter((s: any) => s.cut)).toEqual([]);
  // Printed as they finished, one line a step.
  for (const [i, s] of steps.entries()) expect(run.log()).toContain(`[${i}] ${s.step}: ${s.status}`);
  // What needs CUDA or transformers is reported as skipped, not run and not failed.
  expect(steps[0].summary).toMatch(/flash: skipped \(no CUDA\)/);
  // Nsight Compute's counters and the probes of cuBLAS's forms and FlashAttention-2's grids are CUDA's alone.
  expect(steps[8].summary).toBe('needs CUDA (Nsight Compute) and bench-qwen3');
  expect(steps[9].summary).toBe('needs CUDA');
  const rest = steps[10].summary;
  expect(rest).toMatch(/skipped: families: no transformers/);
  expect(rest).toMatch(/skipped: fp8: needs CUDA/);
  expect(fs.readFileSync(path.join(run.out, 'summary.md'), 'utf8')).toBe(files['window.md']);

  const preflight = JSON.parse(files['preflight.json']);
  expect(preflight.versions.torch).toMatch(/^1\./);
  // Which attention kernels beyond libtorch's FlashAttention-2 the machine has: none here (torch 1.13 registers none).
  expect(preflight.attention_impls).toEqual({ torch_flash_impls: null, packages: { flash_attn_interface: false, flash_attn: false, flash_attn_3: false } });
  const selfcheck = JSON.parse(files['selfcheck.json']);
  expect(Object.keys(selfcheck)).toEqual(['tiny-qwen3 fp32']);
  // And again with split-key attention (the state tier and the questions' own; on the GPU, its kernel against its host twin too).
  const splitKeyCheck = JSON.parse(files['selfcheck-split-key.json']);
  expect(Object.keys(splitKeyCheck)).toEqual(['tiny-qwen3 fp32']);
  expect(files['selfcheck-split-key.md']).toContain('--state-attention split-key');
  for (const r of [...Object.values<any>(selfcheck), ...Object.values<any>(splitKeyCheck)]) {
    expect(r.firstBeyondBound).toBeNull();
    expect(r.graphs.labelLogitsMaxDiff).toBeLessThanOrEqual(r.bound);
  }
  expect(Object.values<any>(splitKeyCheck)[0].candidate.stateAttention).toBe('split-key');
  // The kernel against its host twin (cascade_check split-key-device), the CPU standing in for the GPU here.
  expect(steps[6].summary).toContain('split-key kernel on cpu against its host twin: 0 of 48 differ, 0 in the tiers\' one launch');
  // The merge against its CPU loop (cascade_check merge-device), and the fused row kernels against their host forms
  // (row_kernels_device_check), likewise.
  expect(steps[6].summary).toMatch(/merge on cpu against its CPU loop: 0 of \d+ differ, 0 of \d+ in place, by at most 0.0e\+00 \(fp32\), 0.0e\+00 \(bf16\)/);
  expect(steps[6].summary).toMatch(/row kernels on cpu against their host forms: addRmsNorm 0 of \d+ differ, gatedMul 0 of \d+ differ, qkNormRope 0 of \d+ differ/);
  const bench = JSON.parse(files['bench.json']).benchmark;
  for (const p of ['tqserve', 'tqserve_fast', 'torch_graphs']) expect(bench[p].cold_prefill_ms).toBeGreaterThan(0);
  // The fast path's 1,000-token prefills replay a CUDA graph's shape once it is captured (on the CPU: run from the shape's
  // buffers, their launches checked against the capture's). (The warm question's step is new at the short form's last
  // repetition: its first.)
  for (const workload of ['cold_prefill', 'state_16_questions']) expect(bench.tqserve_fast.graph_replays[workload]).toBeGreaterThan(0);
  expect(files['bench.md']).toMatch(/Steps that replayed a CUDA graph in the last repetition: cold_prefill [1-9]/);
  // The host's planning of each workload's call, as the engine measured it.
  for (const workload of ['cold_prefill', 'state_16_questions', 'warm_question']) expect(bench.tqserve_fast.plan_ms[workload]).toBeGreaterThan(0);
  expect(files['bench.md']).toMatch(/The host's planning of each call before its steps ran \(planMs, the last repetition\): cold_prefill \d+\.\d{3} ms/);
  // And its time in CUDA graph launches: none on the CPU, whose graphs' steps run eagerly from their buffers.
  expect(bench.tqserve_fast.graph_launch_ms).toEqual({ cold_prefill: 0, state_16_questions: 0, warm_question: 0 });
  expect(files['bench.md']).toMatch(/The host's CUDA graph launches in each call \(graphLaunchMs, the last repetition; the device idle meanwhile\): cold_prefill 0\.000 ms/);
  // The warm question's label logits beside the cold prefill's, and the GEMM forms its engine chose: none on the CPU.
  expect(bench.tqserve_fast.label_logits_warm.length).toBe(bench.tqserve_fast.label_logits_cold.length);
  expect(bench.tqserve_fast.gemm_forms_warm).toEqual([]);
  // The plain PyTorch peer computes the same model: its label probabilities are tqserve's, to bf16's rounding.
  expect(bench.max_abs_probability_diff_vs_torch_graphs).toBeLessThan(0.05);
  expect(Object.keys(bench.ratios_torch_graphs).sort()).toEqual(['cold_prefill', 'state_16_questions', 'throughput', 'warm_question']);
  // The profile of each workload the benchmark measures: CPU ops ranked per call, printed in the window's output.
  const profile = JSON.parse(files['profile.json']).profile;
  // (With split-key's state tier too on CUDA: its kernel's profile, which its host twin's here would not be.)
  // (The short form's states are 300 tokens, not 1,000: the names say so.)
  expect(Object.keys(profile)).toEqual(['cold-300', 'warm-24-over-300', 'state-16-questions', 'throughput-2x301']);
  for (const p of Object.values<any>(profile)) expect(p.calls['0'].top.length).toBeGreaterThan(0);
  expect(run.log()).toContain('### warm-24-over-300');
  // bf16 bits at the benchmark's size (the short form's): alone, in a batch of 8, cached, another step size (256: the state in two).
  const invariance = JSON.parse(files['invariance.json']).invariance;
  expect(invariance.state_tokens).toBe(300);
  expect(invariance.passed).toBe(true);
  expect(invariance.max_abs_logit_diff).toEqual({ batch_of_8: 0, from_cache: 0, step_256: 0 });
  expect(invariance.split_key.passed).toBe(true);
  // Our few-row GEMM's variant is CUDA's alone (its option is refused on the CPU, where no GEMM form is chosen).
  expect(invariance.own_gemm).toBeUndefined();
  expect(invariance.split_key.max_abs_logit_diff).toEqual({ batch_of_8: 0, from_cache: 0, step_256: 0 });
  const serve = JSON.parse(files['serve.json']);
  expect(serve.load.requests).toBeGreaterThan(0);
  // Timed through node:http (fetch's own cost per request is the client's).
  expect(serve.client).toBe('node:http, kept-alive connections');
  // The server's CPU over the load (Linux's /proc): whether the front end, not the engine, bounded it.
  expect(serve.load.serverCpuMsPerRequest).toBeGreaterThan(0);
  expect(serve.load.serverMainThreadBusy).toBeGreaterThan(0);
  expect(serve.load.serverMainThreadBusy).toBeLessThan(1.1);
  expect(files['serve.md']).toMatch(/the server process's CPU \d+\.\d\d ms a request \(all its threads\), its main thread busy \d+% of the load \(its polling of the channel included\)/);
  // The engine's host planning, from each answer's x-service-stages: a part of the engine call.
  // The warm state again after the load, on a server past its first thousands of requests, and the HTTP's part.
  expect(serve.warmAfterLoad.n).toBe(4);
  for (const s of [serve.cold, serve.warm, serve.warmAfterLoad]) {
    expect(s.beyondEngineP50).toBeGreaterThan(0);
    expect(s.planP50).toBeGreaterThanOrEqual(0);
    expect(s.planP50).toBeLessThanOrEqual(s.engineP50);
    // And where the rest went, stage by stage: the server's whole holds the engine and its own part.
    expect(s.stagesP50.engine).toBe(s.engineP50);
    expect(s.stagesP50.server).toBeGreaterThanOrEqual(s.stagesP50.own);
    expect(s.stagesP50.own).toBeGreaterThan(0);
    expect(s.stagesP50.hop).toBeGreaterThanOrEqual(0);
  }
  expect(files['serve.md']).toMatch(/- warm: server \d+\.\d\d, own \d+\.\d\d, outside -?\d+\.\d\d, .*engine \d+\.\d\d/);
  expect(files['serve.md']).toMatch(/A warm request over HTTP less its engine call, p50: \d+\.\d\d ms just after the start, \d+\.\d\d ms after the load/);
  expect(serve.engineAlone.promptTokensPerSecond).toBeGreaterThan(0);
  // And the engine's ceiling: the same calls with the next launched while one runs (tq_cli --in-flight 2).
  expect(serve.engineInFlight.inFlight).toBe(2);
  expect(serve.engineInFlight.promptTokensPerSecond).toBeGreaterThan(0);
  expect(serve.engineInFlight.callP50).toBeGreaterThan(0);
  expect(serve.engineAlone.callP50).toBeGreaterThan(0);
  expect(files['serve.md']).toMatch(/With two calls in flight .* the server delivers \d+% of that ceiling/);
  expect(steps[7].summary).toMatch(/% of it with two calls in flight \(\d+\.\d\dx one at a time\)$/);
  expect(steps[7].summary).toMatch(/warm p50 \d+\.\d ms \(\d+\.\d after the load, \d+\.\d\d beyond its engine call\)/);
  expect(steps[7].summary).toMatch(/req\/s under 4 clients \(the server's main thread \d+% busy, its polling of the channel included\)/);
  // Two engines on the one device, the same load: on the CPU each sizes its cache by the context.
  expect(steps[11].summary).toMatch(/^two engines: [\d.]+ req\/s under 4 clients, [\d.]+x one engine's; their caches [\d.]+ GiB \(context\), [\d.]+ GiB \(context\)$/);
  const twoEngines = JSON.parse(files['two-engines-serve.json']);
  expect(twoEngines.engineAlone).toBeUndefined();
  expect(twoEngines.health.engines).toHaveLength(2);
  expect(files['server.log']).toContain('listening at');
  const parity = JSON.parse(files['parity.json']).parity;
  expect(parity['tiny-qwen3'].fp32.passed).toBe(true);
  expect(parity['tiny-qwen3'].fp32.gpu_vs_float64_max_abs_logit).toBeLessThanOrEqual(1e-4);
}, 240_000);

test('a run killed mid-way (its whole process group, SIGKILL) leaves a whole tarball with the finished steps\' results, and --resume goes on from there', async () => {
  const run = window('killed', ['--short', '--steps', 'preflight,bench']);
  const unpacked = path.join(scratch, 'killed', 'unpacked');
  // Waits on state: the tarball packed after the preflight (the benchmark is then running).
  let files: Record<string, string> | undefined;
  const preflightPacked = () => {
    files = unpack(run.out, unpacked);
    return files !== undefined && JSON.parse(files['window.json']).steps.some((s: any) => s.step === 'preflight');
  };
  while (!preflightPacked()) {
    if (run.child.exitCode !== null) throw new Error(`the window ended before it was killed:\n${run.log()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  process.kill(-run.child.pid!, 'SIGKILL');
  await run.done;
  files = unpack(run.out, unpacked)!;
  expect(fs.readdirSync(run.out).length).toBeLessThanOrEqual(8);
  const steps = JSON.parse(files['window.json']).steps;
  expect(steps.map((s: any) => `${s.step} ${s.status}`)).toEqual(['preflight ok']);
  // The finished step's own results, whole; nothing of the benchmark it was killed in.
  const preflight = JSON.parse(files['preflight.json']);
  expect(preflight.versions.torch).toMatch(/^1\./);
  // Which attention kernels beyond libtorch's FlashAttention-2 the machine has: none here (torch 1.13 registers none).
  expect(preflight.attention_impls).toEqual({ torch_flash_impls: null, packages: { flash_attn_interface: false, flash_attn: false, flash_attn_3: false } });
  expect(files['bench.json']).toBeUndefined();

  // The device's second command: the finished step and its files kept, the steps not yet run run now (the models
  // step here, at once on the CPU: any step not recorded, as the benchmark the kill stopped is not, is one).
  const resumed = window('killed', ['--short', '--steps', 'preflight,models', '--resume']);
  expect(await resumed.done).toBe(0);
  const after = unpack(resumed.out, unpacked)!;
  expect(JSON.parse(after['window.json']).steps.map((s: any) => `${s.step} ${s.status}`)).toEqual(['preflight ok', 'models ok']);
  expect(resumed.log()).not.toContain('preflight: ok');
  expect(after['preflight.json']).toBe(files['preflight.json']);
  expect(after['window.md']).toContain('resumed, kept from the run before: preflight');
}, 120_000);

/** Processes whose command line holds `text` (pgrep -f), this one's own pgrep aside. */
function processesNaming(text: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', text], { encoding: 'utf8' }).trim().split('\n').filter((l) => l && !l.includes('pgrep'));
  } catch {
    return []; // pgrep's status 1: none
  }
}

/**
 * Processes whose environment holds `entry` (NAME=value): what a run started, whatever other test files start beside
 * it (another jest worker's servers name the same script).
 */
function processesWithEnvironment(entry: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (!fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(entry)) continue;
      found.push(`${pid} ${fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim()}`);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

test('a step past its time is stopped with everything it started (the server and its engine processes), and the window goes on to pack', async () => {
  // A load of 600 s cannot end within the step's limit: the budget (13 s) less the 10 s kept for packing. The value
  // marks this run's processes (each inherits it).
  const marker = `TQ_LOAD_SECONDS=600.${process.pid}`;
  expect(processesWithEnvironment(marker)).toEqual([]);
  const run = window('timeout', ['--short', '--steps', 'serve', '--budget', '13'], { TQ_LOAD_SECONDS: marker.split('=')[1] });
  expect(await run.done).toBe(0);
  const files = unpack(run.out, path.join(scratch, 'timeout', 'unpacked'))!;
  // Stopped by the budget, not by its own cap (180 s): recorded as cut, which a --resume runs again.
  expect(JSON.parse(files['window.json']).steps.map((s: any) => `${s.step} ${s.status} ${s.cut}`)).toEqual(['serve timeout true']);
  expect(files['serve.log']).toMatch(/\[window\] killed after \d+ s/);
  expect(processesWithEnvironment(marker)).toEqual([]);
  expect(processesNaming(path.join(scratch, 'timeout'))).toEqual([]);
  // A --resume keeps no step the budget cut (here asked for another step alone: the cut one is not kept).
  const resumed = window('timeout', ['--short', '--steps', 'preflight', '--resume']);
  expect(await resumed.done).toBe(0);
  const after = unpack(resumed.out, path.join(scratch, 'timeout', 'unpacked'))!;
  expect(JSON.parse(after['window.json']).steps.map((s: any) => `${s.step} ${s.status}`)).toEqual(['preflight ok']);
  expect(after['window.md']).toContain('resumed, kept from the run before: nothing');
}, 120_000);

// The steps' summaries that only a GPU reaches (CI runs the CPU form, where they are skipped), from their scripts'
// results as they write them: a mistake in them would first show in a window, its summary lost.
test("the CUDA steps' summaries read their scripts' results: Nsight Compute's counters, the probes, our few-row GEMM's tilings, its benchmark path", () => {
  const work = fs.mkdtempSync(path.join(scratch, 'cuda-summaries-'));
  const script = `
import json, os, sys, types
sys.path.insert(0, ${JSON.stringify(path.join(root, 'bench', 'gpu'))})
import window
work = ${JSON.stringify(work)}
os.makedirs(work + '/models/bench-qwen3')
open(work + '/models/bench-qwen3/config.json', 'w').write('{}')
args = types.SimpleNamespace(out=work, work=work, budget=520, device='cuda', models=work + '/models', build=work, short=False, families=None, resume=False)
w = window.Window(args)
def script(name, file, a, cap, log=None):
    out = a[a.index('--out') + 1]
    if file == 'kernel_counters.py':
        json.dump({'cold-1000': {'launches': [{'kernel': 'void tq::cuda::(anonymous namespace)::add_rms_norm_kernel<float>(tq::RowArgs)', 'us': 6.2,
                   'memory_pct': 40.0, 'stalls': {'long_scoreboard': 50.0, 'barrier': 10.0}}]}, 'throughput-32x1001': {'error': 'ncu failed'}},
                  open(os.path.join(out, 'kernel_counters.json'), 'w'))
    elif file == 'gemm_probe.py':
        json.dump({'shapes': {'down': {'32': {'linear': {'us': 69.0, 'same_bits_as_cold': True}, 'linear_split_k_allowed': {'us': 8.0, 'same_bits_as_cold': False},
                   'batch_64': {'us': 9.5, 'same_bits_as_cold': True}}}}}, open(out, 'w'))
    elif file == 'attention_probe.py':
        json.dump({'grids': {'warm, state': {'alone': 11.5, 'padded': 15.6}}}, open(out, 'w'))
    elif file == 'check.py':
        json.dump({'benchmark': {'ratios_path': 'tqserve_fast', 'ratios_torch_graphs': {'warm_question': 1.18}, 'ratios_own_gemm_vs_fast': {'warm_question': 1.6},
                   'own_gemm_same_bits': True, 'tqserve_fast_own_gemm': {'gemm_forms_warm': [{'out': 1024, 'in': 3072, 'rowBucket': 32, 'form': 'own_16x8'},
                   {'out': 1024, 'in': 3072, 'rowBucket': 1, 'form': 'linear'}]}, 'invariance_cost': {'warm_question': 1.02}}}, open(os.path.join(out, 'bench.json'), 'w'))
    return 0, 1.0
def run(name, command, cap, env=None, log=None):
    trial = {'rows': 24, 'out': 1024, 'in': 3072, 'linearSameBits': True, 'linearUs': 69.1,
             'own': [{'form': 'own_32x16', 'sameBits': True, 'maxAbsDiff': 0, 'us': 9.0}, {'form': 'own_16x8', 'sameBits': True, 'maxAbsDiff': 0, 'us': 6.1}]}
    open(os.path.join(work, 'own_gemm.log'), 'w').write(json.dumps({'timed': True, 'trials': [trial]}) + '\\n')
    return 0, 1.0
w.script, w.run = script, run
print(json.dumps({'counters': w.counters(), 'probes': w.probes(), 'own_gemm': w.own_gemm(), 'bench': w.bench()}))
`;
  const said = JSON.parse(execFileSync(debianPython, ['-c', script], { encoding: 'utf8' }));
  expect(said.counters).toEqual(['ok', 'ncu (first launches: µs, memory throughput of peak): cold-1000 add_rms_norm_kernel<float> 6 µs 40% stalled on '
    + 'long_scoreboard 50%, barrier 10%; throughput-32x1001 none (ncu failed)']);
  expect(said.probes).toEqual(['ok', "GEMM forms at 32 rows, µs linear / split-K allowed / fastest with a cold row's bits: down 69.0/8.0/batch_64 9.5; "
    + "FA2 grids, µs a layer, the work alone / with the fixed form's padding: warm, state 11.5 / 15.6"]);
  expect(said.own_gemm).toBe('; own few-row GEMM at 24 rows, µs fastest tiling / linear: down 6.1 (own_16x8) / 69.1 (same bits)');
  expect(JSON.parse(fs.readFileSync(path.join(work, 'own_gemm.json'), 'utf8')).trials[0].own).toHaveLength(2);
  expect(said.bench[1]).toContain('against torch graphs: warm_question 1.18x | own GEMM against fast: warm_question 1.60x (same bits; warm forms at 32 rows '
    + "{'1024x3072': 'own_16x8'}) | invariance costs (fast over fast without it): warm_question 1.02x");
});

// A failed build's summary line names its first error (the log's end says only that the build stopped).
test('the build step\'s summary names the first compiler error of its log', () => {
  const log = path.join(scratch, 'build.log');
  fs.writeFileSync(log, ['$ cmake --build build', '[1/90] Building CXX object a.o', 'FAILED: b.o',
    'csrc/kernels/cpu/gemm/onednn.cpp:22: error: \'desc\' is not a member of \'dnnl::matmul\'', 'csrc/x.cpp:3: error: later',
    'ninja: build stopped: subcommand failed.'].join('\n'));
  const said = execFileSync(debianPython, ['-c', `import sys; sys.path.insert(0, ${JSON.stringify(path.join(root, 'bench', 'gpu'))}); import window; ` +
    `print(window.first_error(${JSON.stringify(log)}))`], { encoding: 'utf8' }).trim();
  expect(said).toBe('first error: csrc/kernels/cpu/gemm/onednn.cpp:22: error: \'desc\' is not a member of \'dnnl::matmul\'');
});
