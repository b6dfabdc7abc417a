/**
 * The engine's command-line program (csrc/cli/main.cpp, the same engine library without Node):
 * it must answer exactly like the addon, and fail with a JSON error and exit status 2, a flag it does not know or a
 * value it cannot take included.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { imageKey } from '../../src/images/key';
import { preprocessImage } from '../../src/images/preprocess';
import { png } from '../helpers/images';
import { debianPython, tinyModel } from '../helpers/models';
import { tokenizeTexts } from '../helpers/tokens';
import { runsBf16Amx } from '../helpers/cpu';
import { runCli } from '../helpers/tq-cli';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cli-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

// The CLI over each checkpoint layout (shards, dtypes, tied or not); every family's arithmetic is the
// engine's, checked in parity, invariance and aten-kernels.
describe.each(['tiny-llama', 'tiny-mistral', 'tiny-qwen2', 'tiny-qwen3'])('tq_cli on %s', (name) => {
  test.each(['fp32', 'bf16'] as const)('answers like the addon in %s: the same label logits, bit for bit', async (dtype) => {
    const dir = tinyModel(name);
    const { state, questions, labels } = await tokenizeTexts(dir);
    // A batch of two calls: the second finds the first's state in the prefix cache.
    const calls = [
      [{ state, questions: questions.map((tokens) => ({ tokens, labelIds: labels, temperature: 1.5 })) },
        { state: state.slice(0, 9), questions: [{ tokens: questions[0], labelIds: labels.slice(0, 2) }] }],
      [{ state, questions: [{ tokens: questions[1], labelIds: labels }] }],
    ];
    const file = path.join(scratch, `${name}-${dtype}.json`);
    fs.writeFileSync(file, JSON.stringify({ calls }));
    // The CLI's process runs while the addon answers.
    const running = runCli(['answer', '--model', dir, '--dtype', dtype, '--threads', '2', '--calls', file]);
    running.catch(() => undefined);  // awaited below
    const engine = await Engine.open({ path: dir, dtype, threads: 2, registerBoundary: 'before' });
    const viaAddon = [];
    for (const call of calls) viaAddon.push(await engine.answerBatch(call));
    await engine.close();
    const cli = await running;
    expect(cli.info).toMatchObject({ dtype, device: { mode: 'cpu' }, batchInvariant: true });
    // One serializer of the engine's info (engine/engine_info_json.h): the addon's keys, and its values where a load does not vary them.
    expect(Object.keys(cli.info).sort()).toEqual(Object.keys(engine.info).sort());
    // Each process measures its kernel level (docs/engine.md, "Which level runs"): where two run about as fast (fp32 on Zen 5),
    // the two may choose apart. The level is one each measured, and the bits below are the same at any.
    const { weightsMs: _w, device: _d, levelChoice: _l, kernels: _k, ...fixed } = engine.info;
    expect(cli.info).toMatchObject(fixed);
    expect(Object.keys(cli.info.levelChoice.gflops).sort()).toEqual(Object.keys(engine.info.levelChoice!.gflops).sort());
    expect(Object.keys(cli.info.levelChoice.gflops)).toContain(cli.info.kernels);
    for (const [c, results] of viaAddon.entries()) {
      results.forEach((r, i) => {
        expect(cli.calls[c][i].cachedTokens).toBe(r.cachedTokens);
        r.answers.forEach((a, j) => {
          expect(cli.calls[c][i].answers[j].labelLogits).toEqual(Array.from(a.labelLogits));
          expect(cli.calls[c][i].answers[j].labelLogProbs).toEqual(Array.from(a.labelLogProbs));
        });
      });
    }
    expect(cli.calls[1][0].cachedTokens).toBe(state.length);
  });
});

// The GPU machine's cross-check against transformers (bench/gpu/families.py) gives tq_cli its images as raw RGB.
test('tq_cli answers a state with an image (raw RGB in the request) like the addon, bit for bit', async () => {
  const dir = tinyModel('tiny-qwen2.5-vl');
  const im = await preprocessImage(await png(90, 60, 1));
  const rgb = path.join(scratch, 'image.rgb');
  fs.writeFileSync(rgb, im.rgb);
  const state = [1000, 1037, 151652, 151655, 151653, 2000], questions = [{ tokens: [3000, 3037, 3074], labelIds: [11, 22, 33] }];
  const file = path.join(scratch, 'image-call.json');
  fs.writeFileSync(file, JSON.stringify({ calls: [[{ state, images: [{ rgb, width: im.width, height: im.height }], questions }]] }));
  const cli = await runCli(['answer', '--model', dir, '--threads', '2', '--calls', file]);
  const engine = await Engine.open({ path: dir, threads: 2 });
  try {
    const res = await engine.answer({ state, images: [{ rgb: new Uint8Array(im.rgb), width: im.width, height: im.height, key: imageKey(im, dir) }], questions });
    expect(cli.calls[0][0].answers[0].labelLogits).toEqual(Array.from(res.answers[0].labelLogits));
  } finally {
    await engine.close();
  }
});

test('tq_cli reports errors as JSON with exit status 2', async () => {
  const ok = path.join(scratch, 'ok.json');
  fs.writeFileSync(ok, JSON.stringify({ calls: [[{ state: [1, 2], questions: [{ tokens: [3], labelIds: [4, 5] }] }]] }));
  // Each its own process, so they run side by side.
  await Promise.all([
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', path.join(scratch, 'missing.json')])).rejects.toThrow(/cannot read/),
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', ok, '--device', 'cuda'])).rejects.toThrow(/\(2\).*"BAD_REQUEST".*without CUDA/),
    expect(runCli(['transmogrify'])).rejects.toThrow(/unknown command/),
    // A flag is honoured or refused, never ignored.
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', ok, '--register-boundary', 'after'])).rejects.toThrow(/has no flag --register-boundary/),
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', ok, '--block-size', '1.5'])).rejects.toThrow(/--block-size must be an integer, got 1.5/),
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', ok, '--prefix-cache', 'maybe'])).rejects.toThrow(/--prefix-cache must be on or off/),
    expect(runCli(['gemm', '--labels', '4'])).rejects.toThrow(/tq_cli gemm has no flag --labels/),
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', ok, '--batch-invariant', 'yes'])).rejects.toThrow(/--batch-invariant must be on or off/),
    // A choice is read through its table: a name of none of its values is refused, the choices listed.
    expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', ok, '--kernels', 'fast'])).rejects.toThrow(/kernels must be engine, aten or fused, got fast/),
    expect(runCli(['gemm', '--dtype', 'fp16'])).rejects.toThrow(/gemm --dtype must be fp32 or bf16/),
    // The few-row GEMM's probe: its lists read whole, and on a build without CUDA refused, not run on the CPU.
    expect(runCli(['gemm-rows', '--rows', '8,x'])).rejects.toThrow(/gemm-rows --rows: x is not a positive integer/),
    expect(runCli(['gemm-rows', '--shapes', '1024x3072,1024'])).rejects.toThrow(/gemm-rows --shapes: 1024 is not OUTxIN/),
    expect(runCli(['gemm-rows', '--time', 'maybe'])).rejects.toThrow(/--time must be on or off, got maybe/),
    expect(runCli(['gemm-rows', '--device', 'cpu'])).rejects.toThrow(/"BAD_REQUEST".*gemm-rows needs a CUDA build/),
    expect(runCli(['gemm-rows', '--device', 'cpu', '--time', 'off'])).rejects.toThrow(/"BAD_REQUEST".*gemm-rows needs a CUDA build/),
  ]);
});

// Its flags are the engine's options by their load() names (engine/named_fields.h), so each is honoured.
test("tq_cli takes every engine option as a flag, the addon's name in kebab-case", async () => {
  const state = Array.from({ length: 40 }, (_, i) => 100 + i);
  const twice = path.join(scratch, 'twice.json');
  fs.writeFileSync(twice, JSON.stringify({ calls: [[{ state, questions: [{ tokens: [3], labelIds: [4, 5] }] }], [{ state, questions: [{ tokens: [6], labelIds: [4, 5] }] }]] }));
  const model = ['answer', '--model', tinyModel('tiny-qwen3'), '--calls', twice, '--threads', '1'];
  const [cached, uncached] = await Promise.all([
    runCli([...model, '--block-size', '8', '--context-limit', '1000', '--cache-tokens', '4000']),
    runCli([...model, '--prefix-cache', 'off', '--batch-invariant', 'off', '--cache-mib', '1']),
  ]);
  expect(cached.info).toMatchObject({ blockSize: 8, contextLimit: 1000, cacheSizedBy: 'tokens', cacheBlocks: 500, prefixCache: true, batchInvariant: true });
  expect(cached.calls[1][0].cachedTokens).toBe(40);
  expect(uncached.info).toMatchObject({ prefixCache: false, batchInvariant: false, cacheSizedBy: 'mib' });
  expect(uncached.calls[1][0].cachedTokens).toBe(0);
});

// --in-flight 2: each call launched before the one before it is finished, as the engine thread runs calls that queue.
test('tq_cli answer --in-flight 2 gives the bits of one call at a time, the prefix cache included; other counts refused', async () => {
  const state = Array.from({ length: 40 }, (_, i) => 100 + i);
  const file = path.join(scratch, 'in-flight.json');
  const call = (tokens: number[]) => [{ state, questions: [{ tokens, labelIds: [4, 5, 6] }] }];
  fs.writeFileSync(file, JSON.stringify({ calls: [call([3]), call([6, 7]), call([8]), [{ state: state.slice(0, 20), questions: [{ tokens: [9], labelIds: [4, 5] }] }]] }));
  const model = ['answer', '--model', tinyModel('tiny-qwen3'), '--calls', file, '--threads', '1', '--dtype', 'bf16'];
  const [one, two] = await Promise.all([runCli([...model, '--in-flight', '1']), runCli([...model, '--in-flight', '2'])]);
  const answers = (out: any) => out.calls.map((c: any[]) => c.map((r) => [r.answers, r.cachedTokens, r.computedTokens]));
  expect(answers(two)).toEqual(answers(one));
  // The second call found the first's state, registered as the first was launched.
  expect(two.calls[1][0].cachedTokens).toBe(40);
  expect(two.wallMs[0]).toHaveLength(4);
  expect(two.repeatMs).toHaveLength(1);
  await expect(runCli([...model, '--in-flight', '3'])).rejects.toThrow(/--in-flight must be 1 or 2/);
});

// A request's optional fields are read through the addon's list (engine/named_fields.h), each by its type.
test("tq_cli reads a request's optional fields as the addon does: honoured, or refused by type with their place", async () => {
  const state = Array.from({ length: 40 }, (_, i) => 100 + i);
  const request = (extra: object, question: object = {}) => ({ state, questions: [{ tokens: [3], labelIds: [4, 5], ...question }], ...extra });
  const file = path.join(scratch, 'fields.json');
  fs.writeFileSync(file, JSON.stringify({ calls: [[request({ cacheSalt: 'tenant-a' })], [request({ cacheSalt: 'tenant-b', wantHidden: false })], [request({ cacheSalt: 'tenant-a' }, { temperature: 2 })]] }));
  const out = await runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', file, '--threads', '1']);
  const [a, b, again] = out.calls.map((call: any) => call[0]);
  expect(b.cachedTokens).toBe(0); // another salt: none of tenant a's blocks
  expect(again.cachedTokens).toBe(state.length); // the same salt: its state
  expect(a.answers[0].hiddenAbsSum).toBeGreaterThan(0);
  expect(b.answers[0].hiddenAbsSum).toBe(0); // wantHidden false: no hidden state read
  expect(again.answers[0].labelLogits).toEqual(a.answers[0].labelLogits);
  expect(again.answers[0].labelLogProbs).not.toEqual(a.answers[0].labelLogProbs); // tempered by 2
  const bad = path.join(scratch, 'bad-fields.json');
  fs.writeFileSync(bad, JSON.stringify({ calls: [[request({}), request({}, { temperature: 'hot' })]] }));
  await expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', bad])).rejects.toThrow(/calls\[0\]\[1\]\.questions\[0\]\.temperature must be a number/);
});

test('tq_cli runs the microbenchmarks the addon no longer carries', async () => {
  const gemm = await runCli(['gemm', '--m', '64', '--k', '128', '--n', '256', '--iterations', '2']);
  expect(gemm.gflops).toBeGreaterThan(0);
  // The native arithmetic's GEMM (bf16 on AMX tiles): on the tiles, or on their model under TQ_AMX_MODEL=1; refused without either.
  const native = ['gemm', '--m', '32', '--k', '128', '--n', '64', '--iterations', '1', '--dtype', 'bf16', '--arithmetic', 'native'];
  expect((await runCli(native, { TQ_AMX_MODEL: '1' })).isa).toBe('amx-bf16');
  if (!runsBf16Amx()) await expect(runCli(native)).rejects.toThrow(/gemm --arithmetic native: this CPU has no AMX-BF16/);
  const readout = await runCli(['readout', '--model', tinyModel('tiny-llama'), '--labels', '8', '--iterations', '3']);
  expect(readout.readoutMs).toBeGreaterThan(0);
  expect(readout.fullMs).toBeGreaterThan(0);
});

// The GPU check's first part (bench/gpu/selfcheck.py) on the CPU: the fused forward against the ATen one, layer by
// layer (tiny-qwen3: per-head q/k norms in the fused launch; tiny-gemma3: sandwich norms, windows; tiny-qwen2-moe:
// the experts and the shared expert on the fused kernels' GEMMs). On the GPU the same command finds the first tensor
// where the CUDA kernels disagree.
test.each(['tiny-qwen3', 'tiny-gemma3', 'tiny-qwen2-moe'])('tq_cli selfcheck compares the fused forward with the ATen one layer by layer on %s', async (name) => {
  const fp32 = await runCli(['selfcheck', '--model', tinyModel(name), '--dtype', 'fp32', '--threads', '2']);
  expect(fp32.reference).toMatchObject({ kernels: 'aten', attention: 'direct' });
  expect(fp32.candidate).toMatchObject({ kernels: 'fused', attention: 'cascade' });
  expect(fp32.sameTensorCount).toBe(true);
  expect(fp32.tensorsCompared).toBeGreaterThanOrEqual(14);  // 7 per layer
  expect(fp32.firstBeyondBound).toBeNull();
  expect(fp32.labelLogitsMaxDiff).toBeLessThanOrEqual(1e-5);
});

test('tq_cli selfcheck names the first tensor beyond its bound (a bound of 0: the first that differs at all)', async () => {
  const strict = await runCli(['selfcheck', '--model', tinyModel('tiny-qwen3'), '--dtype', 'fp32', '--threads', '2', '--bound', '0']);
  const first = strict.tensors.find((t: { relative: number }) => t.relative > 0);
  expect(strict.firstBeyondBound).toEqual(first);
  expect(first.name).toMatch(/^layer 0 /);
});

// The profile of every call the GPU window measures (bench/gpu/check.py --parts profile) in its CPU form: tq_cli records
// the last repetition's calls, each in its own scope, and kernel_profile.py ranks each call's CPU ops by self time.
test('tq_cli answer --profile writes a trace of the last repetition, each call apart, that kernel_profile.py ranks', async () => {
  const dir = tinyModel('tiny-qwen3');
  const { state, questions, labels } = await tokenizeTexts(dir);
  const calls = [[{ state, questions: [{ tokens: questions[0], labelIds: labels }] }], [{ state: state.slice(0, 5), questions: [{ tokens: questions[1], labelIds: labels }] }]];
  const file = path.join(scratch, 'profiled-calls.json');
  const trace = path.join(scratch, 'profile.trace.json');
  fs.writeFileSync(file, JSON.stringify({ calls }));
  const out = await runCli(['answer', '--model', dir, '--calls', file, '--repeat', '2', '--profile', trace]);
  expect(out.calls).toHaveLength(2);
  const events = JSON.parse(fs.readFileSync(trace, 'utf8')).traceEvents as { name: string; cat: string; ts: number; dur: number }[];
  const scopes = events.filter((e) => e.cat === 'user_annotation' && /^tq_cli call \d$/.test(e.name));
  // One scope a call, of the last repetition alone.
  expect(scopes.map((e) => e.name).sort()).toEqual(['tq_cli call 0', 'tq_cli call 1']);
  const script = path.resolve(__dirname, '..', '..', 'bench', 'gpu', 'kernel_profile.py');
  const summaryFile = path.join(scratch, 'profile.summary.json');
  const printed = execFileSync(debianPython, [script, trace, '--layers', '2', '--top', '5', '--json', summaryFile], { encoding: 'utf8' });
  const summary = JSON.parse(fs.readFileSync(summaryFile, 'utf8'));
  expect(summary.device).toBe('cpu');
  expect(Object.keys(summary.calls)).toEqual(['0', '1']);
  for (const call of Object.values<any>(summary.calls)) {
    expect(call.top.length).toBeGreaterThan(0);
    expect(call.top.length).toBeLessThanOrEqual(5);
    // Self times: no op's exceeds the call's wall time, and the shares of the ranked ones sum to at most 1.
    expect(call.cpu_op_self_us).toBeLessThanOrEqual(call.wall_us * 1.01);
    expect(call.top.reduce((s: number, k: any) => s + k.share, 0)).toBeLessThanOrEqual(1 + 1e-9);
    expect(call.top[0].us).toBeGreaterThanOrEqual(call.top[call.top.length - 1].us);
  }
  expect(printed).toMatch(/call 0: wall [\d.]+ ms/);
  expect(printed).toMatch(/\| CPU op \| self time \| share \| count \|/);
});

test('tq_cli answer --profile to a folder that does not exist fails with a JSON error, not a crash', async () => {
  const file = path.join(scratch, 'one-call.json');
  fs.writeFileSync(file, JSON.stringify({ calls: [[{ state: [1, 2, 3], questions: [{ tokens: [4], labelIds: [5, 6] }] }]] }));
  await expect(runCli(['answer', '--model', tinyModel('tiny-qwen3'), '--calls', file, '--profile', path.join(scratch, 'no', 'such', 'dir', 't.json')]))
    .rejects.toThrow(/failed \(2\).*profile/);
});

// The self-check traces the fused forward layer by layer against ATen's. With CUDA graphs' step form (buckets, the
// cascade's fixed launch shape), a step computes every row; traced, it must compute the output rows alone in its last
// layer, as ATen's path does (it once returned every row, and the self-check failed on the GPU with an index_copy_ error).
test('tq_cli selfcheck passes in the graphs\' step form (--cuda-graphs on --attention cascade), run here on the CPU', async () => {
  const out = await runCli(['selfcheck', '--model', tinyModel('tiny-qwen3'), '--dtype', 'fp32', '--cuda-graphs', 'on', '--attention', 'cascade']);
  expect(out.sameTensorCount).toBe(true);
  expect(out.firstBeyondBound).toBeNull();
  expect(out.labelLogitsMaxDiff).toBeLessThanOrEqual(1e-4);
});

// --own-gemm: our few-row GEMM among the forms the batch-invariant CUDA engine measures (csrc/kernels/aten/few_rows_gemm.h;
// the choice itself: gemm-forms.test.ts). On the CPU no GEMM form is chosen, so the option is refused, not ignored, and
// an answer's output names no choice.
test('tq_cli --own-gemm is refused off the batch-invariant CUDA engine; off by default, and no GEMM forms chosen on the CPU', async () => {
  const file = path.join(scratch, 'own-gemm.json');
  fs.writeFileSync(file, JSON.stringify({ calls: [[{ state: [100, 101, 102], questions: [{ tokens: [3], labelIds: [4, 5] }] }]] }));
  const answer = ['answer', '--model', tinyModel('tiny-qwen3'), '--calls', file, '--threads', '1', '--dtype', 'bf16'];
  const out = await runCli([...answer, '--kernels', 'fused']);
  expect(out.info.ownGemm).toBe(false);
  expect(out.gemmForms).toBeUndefined();
  for (const kernels of ['engine', 'fused'])
    await expect(runCli([...answer, '--kernels', kernels, '--own-gemm', 'on'])).rejects.toThrow(/ownGemm is a form of the batch-invariant CUDA engine's bf16 GEMMs/);
  await expect(runCli([...answer, '--own-gemm', 'maybe'])).rejects.toThrow(/own-gemm/);
});

// --cuda-graph-chunks: a graph step captured as several graphs, cut between layers (csrc/runner/step_graphs.h). On the
// CPU each cut is recorded with the step's launches and checked at every replay; the answers are the bits of one
// graph a step, and each step launches its graphs: the first of one layer, the next of twice that (tiny-qwen3's 2
// layers: two graphs, whatever the most asked).
test('tq_cli --cuda-graph-chunks cuts each graph step into its graphs: the same bits, each step its graphs; refused where no graph runs', async () => {
  const state = Array.from({ length: 40 }, (_, i) => 100 + i);
  const file = path.join(scratch, 'graph-chunks.json');
  const call = (tokens: number[]) => [{ state, questions: [{ tokens, labelIds: [4, 5, 6] }] }];
  fs.writeFileSync(file, JSON.stringify({ calls: [call([3]), call([6]), call([8])] }));
  const graphs = ['answer', '--model', tinyModel('tiny-qwen3'), '--calls', file, '--threads', '1', '--dtype', 'bf16', '--cuda-graphs', 'on', '--attention', 'cascade'];
  const [one, cut] = await Promise.all([runCli(graphs), runCli([...graphs, '--cuda-graph-chunks', '8'])]);
  expect(cut.info.cudaGraphChunks).toBe(8);
  const answers = (out: any) => out.calls.map((c: any[]) => c.map((r) => r.answers));
  expect(answers(cut)).toEqual(answers(one));
  // The warm calls replay the graphs the first captured; each step launches two graphs where it launched one.
  expect(cut.calls[2][0].graphReplays).toBeGreaterThan(0);
  for (const [c, calls] of one.calls.entries()) {
    expect(calls[0].graphLaunches).toBeGreaterThan(0);
    expect(cut.calls[c][0].graphLaunches).toBe(2 * calls[0].graphLaunches);
  }
  // No launch on the CPU: its graphs' steps run eagerly.
  expect(cut.calls[2][0].graphLaunchMs).toBe(0);
  await expect(runCli([...graphs, '--cuda-graph-chunks', '0'])).rejects.toThrow(/cudaGraphChunks must be 1 to 8/);
  await expect(runCli([...graphs, '--cuda-graph-chunks', '9'])).rejects.toThrow(/cudaGraphChunks must be 1 to 8/);
  await expect(runCli([...graphs.slice(0, -4), '--cuda-graph-chunks', '2'])).rejects.toThrow(/needs cudaGraphs on and the cascade attention/);
});
