/**
 * Bad checkpoints and bad requests give errors with a stable code and a message
 * naming the file and the problem; the process and the engine stay usable.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { EngineError, isEngineError, NativeLoadOptions } from '../../src/engine/native';
import { tinyModel, torchscriptModel } from '../helpers/models';

const good = tinyModel('tiny-llama'); // sharded BF16 checkpoint

async function openError(dir: string): Promise<EngineError> {
  try {
    const e = await Engine.open({ path: dir });
    await e.close();
  } catch (err) {
    if (isEngineError(err)) return err;
    throw err;
  }
  throw new Error(`expected ${dir} to fail to load`);
}

/** A copy of the good checkpoint (hard links; edited files are rewritten, not modified). */
function copyCheckpoint(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-bad-'));
  for (const f of fs.readdirSync(good)) fs.copyFileSync(path.join(good, f), path.join(dir, f));
  return dir;
}

function editConfig(dir: string, edit: (c: Record<string, unknown>) => void) {
  const file = path.join(dir, 'config.json');
  const c = JSON.parse(fs.readFileSync(file, 'utf8'));
  edit(c);
  fs.writeFileSync(file, JSON.stringify(c));
}

/** Rewrites one shard's header so that `name` is renamed or reshaped. */
function editHeader(dir: string, edit: (h: Record<string, any>) => void) {
  const index = JSON.parse(fs.readFileSync(path.join(dir, 'model.safetensors.index.json'), 'utf8'));
  const shard = path.join(dir, index.weight_map['model.layers.0.mlp.up_proj.weight']);
  const buf = fs.readFileSync(shard);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  edit(header);
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  fs.writeFileSync(shard, Buffer.concat([len, Buffer.from(json), buf.subarray(8 + n)]));
  return shard;
}

describe('bad checkpoints', () => {
  const made: string[] = [];
  const bad = () => {
    const d = copyCheckpoint();
    made.push(d);
    return d;
  };
  afterAll(() => made.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  test('a missing folder or config names the file', async () => {
    const err = await openError('/nonexistent/model');
    expect(err.code).toBe('CHECKPOINT_INVALID');
    expect(err.message).toContain('/nonexistent/model');
  });

  test('an unknown architecture is named', async () => {
    const dir = bad();
    editConfig(dir, (c) => (c.architectures = ['GPTNeoXForCausalLM']));
    const err = await openError(dir);
    expect(err.code).toBe('UNKNOWN_ARCHITECTURE');
    expect(err.message).toContain('config.json');
    expect(err.message).toContain('GPTNeoXForCausalLM');
    for (const family of ['LlamaForCausalLM', 'Gemma3ForCausalLM', 'Phi3ForCausalLM', 'Olmo2ForCausalLM', 'SmolLM3ForCausalLM']) expect(err.message).toContain(family);
  });

  test('an unsupported RoPE type or activation is named with what is supported', async () => {
    const rope = bad();
    editConfig(rope, (c) => (c.rope_scaling = { rope_type: 'yarn', factor: 4 }));
    const ropeErr = await openError(rope);
    expect(ropeErr.code).toBe('CHECKPOINT_INVALID');
    expect(ropeErr.message).toMatch(/rope type yarn is not supported \(supported: default, linear, llama3, longrope, mrope\)/);
    const act = bad();
    editConfig(act, (c) => (c.hidden_act = 'relu'));
    expect((await openError(act)).message).toMatch(/hidden_act relu is not supported \(supported: silu, gelu_pytorch_tanh\)/);
  });

  test('a missing tensor is named', async () => {
    const dir = bad();
    editHeader(dir, (h) => {
      h['model.layers.0.mlp.up_proj.renamed'] = h['model.layers.0.mlp.up_proj.weight'];
      delete h['model.layers.0.mlp.up_proj.weight'];
    });
    const err = await openError(dir);
    expect(err.code).toBe('CHECKPOINT_MISSING_TENSOR');
    expect(err.message).toContain('model.layers.0.mlp.up_proj.weight');
    expect(err.message).toContain(dir);
  });

  test('a tensor of the wrong shape names the file, the tensor and both shapes', async () => {
    const dir = bad();
    editConfig(dir, (c) => (c.intermediate_size = 96));
    const err = await openError(dir);
    expect(err.code).toBe('CHECKPOINT_TENSOR_SHAPE');
    expect(err.message).toMatch(/model-0000\d-of-00002\.safetensors: tensor model\.layers\.0\.mlp\.\w+_proj\.weight has shape \[\d+, \d+\], expected \[\d+, \d+\]/);
  });

  test('a truncated shard names the file and says truncated', async () => {
    const dir = bad();
    const shard = path.join(dir, 'model-00002-of-00002.safetensors');
    const size = fs.statSync(shard).size;
    fs.truncateSync(shard, Math.floor(size / 2));
    const err = await openError(dir);
    expect(err.code).toBe('CHECKPOINT_TRUNCATED');
    expect(err.message).toContain('model-00002-of-00002.safetensors');
    expect(err.message).toContain('truncated');
    fs.truncateSync(shard, 4);
    expect((await openError(dir)).code).toBe('CHECKPOINT_TRUNCATED');
  });

  test('a corrupt header and a non-JSON config are reported, not crashed on', async () => {
    const dir = bad();
    const shard = path.join(dir, 'model-00001-of-00002.safetensors');
    const buf = fs.readFileSync(shard);
    buf.write('{{{{', 8);
    fs.writeFileSync(shard, buf);
    const err = await openError(dir);
    expect(err.code).toBe('CHECKPOINT_INVALID');
    expect(err.message).toContain('model-00001-of-00002.safetensors');
    fs.writeFileSync(path.join(dir, 'config.json'), 'not json');
    expect((await openError(dir)).message).toContain('config.json');
  });

  test('a file that is not TorchScript is reported', async () => {
    const file = path.join(bad(), 'config.json');
    const err = await openError(file);
    expect(err.code).toBe('CHECKPOINT_INVALID');
    expect(err.message).toContain('TorchScript');
  });
});

describe('bad requests leave the engine usable', () => {
  let engine: Engine;
  const ok = { state: [1, 2, 3], questions: [{ tokens: [4, 5], labelIds: [6, 7] }] };
  beforeAll(async () => {
    engine = await Engine.open({ path: good, contextLimit: 300 });
  });
  afterAll(() => engine.close());

  async function answerError(req: any): Promise<EngineError> {
    try {
      await engine.answer(req);
    } catch (err) {
      if (isEngineError(err)) return err;
      throw err;
    }
    throw new Error('expected the request to fail');
  }

  test('a prompt over the context limit reports both lengths; one at the limit answers', async () => {
    const err = await answerError({ state: new Array(290).fill(9), questions: [{ tokens: new Array(11).fill(9), labelIds: [6] }] });
    expect(err.code).toBe('CONTEXT_OVERFLOW');
    expect(err.details).toMatchObject({ promptTokens: 301, contextLimit: 300 });
    expect(err.message).toContain('301');
    expect(err.message).toContain('300');
    const atLimit = await engine.answer({ state: new Array(290).fill(9), questions: [{ tokens: new Array(10).fill(9), labelIds: [6] }] });
    expect(atLimit.answers[0].labelLogits.length).toBe(1);
    expect((await engine.answer(ok)).answers).toHaveLength(1);
  });

  test('logitsAll refuses an empty sequence, a token outside the vocabulary and a sequence over the context', async () => {
    const logitsError = (tokens: number[]) => engine.logitsAll(tokens).then(() => undefined, (e) => e as EngineError);
    expect(await logitsError([])).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('at least one token') });
    expect(await logitsError([1, 1e9])).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('1000000000') });
    expect(await logitsError(new Array(301).fill(9))).toMatchObject({ code: 'CONTEXT_OVERFLOW' });
    expect(await engine.logitsAll([1, 2, 3])).toHaveLength(3);
  });

  test('a text model refuses images, in an answer and in logitsAll, naming its missing vision tower', async () => {
    const image = { rgb: new Uint8Array(28 * 28 * 3), width: 28, height: 28, key: '0'.repeat(64) };
    const err = await answerError({ ...ok, images: [image] });
    expect(err).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/^the request has images but \S+ has no vision tower$/) });
    await expect(engine.logitsAll([1, 2, 3], [image])).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/^logitsAll has images but .* has no vision tower$/) });
    expect((await engine.answer(ok)).answers).toHaveLength(1);
  });

  test('the default context limit is 32,768 tokens', async () => {
    const e = await Engine.open({ path: good });
    try {
      expect(e.info.contextLimit).toBe(32768);
      await expect(e.answer({ state: new Int32Array(32768).fill(9), questions: [{ tokens: [1], labelIds: [2] }] })).rejects.toMatchObject({
        code: 'CONTEXT_OVERFLOW',
        details: { promptTokens: 32769, contextLimit: 32768 },
      });
      expect((await e.answer(ok)).answers).toHaveLength(1);
    } finally {
      await e.close();
    }
  });

  test.each([
    ['token id past the vocabulary', { state: [1, 10_000_000], questions: [{ tokens: [4], labelIds: [6] }] }, /outside the vocabulary/],
    ['negative label id', { state: [1], questions: [{ tokens: [4], labelIds: [-1] }] }, /label token 0 is -1/],
    ['no questions', { state: [1], questions: [] }, /at least one question/],
    ['question without tokens', { state: [1], questions: [{ tokens: [], labelIds: [6] }] }, /no tokens/],
    ['question without labels', { state: [1], questions: [{ tokens: [4], labelIds: [] }] }, /no label ids/],
    ['readout index past the question', { state: [1], questions: [{ tokens: [4], labelIds: [6], readoutIndex: 5 }] }, /readout index 5/],
    ['state not a list', { state: 'hello', questions: [{ tokens: [4], labelIds: [6] }] }, /state must be/],
    ['fractional token', { state: [1.5], questions: [{ tokens: [4], labelIds: [6] }] }, /not an integer/],
    // Refused, not read as absent (the last token, temperature 1).
    ['readout index not a number', { state: [1], questions: [{ tokens: [4], labelIds: [6], readoutIndex: '0' }] }, /questions\[0\]\.readoutIndex must be a number/],
    ['temperature not a number', { state: [1], questions: [{ tokens: [4], labelIds: [6], temperature: 'hot' }] }, /questions\[0\]\.temperature must be a number/],
  ])('%s → BAD_REQUEST', async (_name, req, message) => {
    const err = await answerError(req);
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toMatch(message);
    expect((await engine.answer(ok)).answers).toHaveLength(1);
  });

  test('a request larger than the KV cache is refused with KV_CACHE_CAPACITY, then the cache is whole again', async () => {
    const small = await Engine.open({ path: good, cacheTokens: 64, blockSize: 16 });
    try {
      await expect(small.answer({ state: new Array(70).fill(9), questions: [{ tokens: [1], labelIds: [2] }] })).rejects.toMatchObject({ code: 'KV_CACHE_CAPACITY' });
      // Blocks taken before the failure were returned: a request using all 4 blocks fits.
      expect((await small.answer({ state: new Array(48).fill(9), questions: [{ tokens: new Array(16).fill(1), labelIds: [2] }] })).answers).toHaveLength(1);
    } finally {
      await small.close();
    }
  });

  test('the KV cache says what sized it; a GPU memory share outside [0, 1] is refused', async () => {
    const info = async (o: Partial<NativeLoadOptions>) => {
      const e = await Engine.open({ path: good, ...o });
      await e.close();
      return e.info;
    };
    const byContext = await info({});
    expect(byContext.cacheSizedBy).toBe('context');
    // A GPU memory share sizes only a CUDA engine's cache (free device memory); on the CPU the rule is the context's.
    expect(await info({ gpuMemoryUtilization: 0.9 })).toMatchObject({ cacheSizedBy: 'context', cacheBytes: byContext.cacheBytes, gpuMemoryUtilization: 0.9 });
    expect(await info({ cacheTokens: 64, blockSize: 16 })).toMatchObject({ cacheSizedBy: 'tokens', cacheBlocks: 4 });
    expect(await info({ cacheMiB: 1 })).toMatchObject({ cacheSizedBy: 'mib' });
    await expect(Engine.open({ path: good, gpuMemoryUtilization: 1.5 })).rejects.toThrow(/gpu_memory_utilization must be in \[0, 1\]/);
  });

  test("a choice's older name loads as its new one (a name of neither: aten-kernels.test.ts)", async () => {
    const e = await Engine.open({ path: good, attention: 'kernels', isa: 'portable' as 'generic' });
    await e.close();
    expect(e.info).toMatchObject({ attention: 'direct', kernels: 'generic' });
  });

  test('a closed engine rejects with ENGINE_CLOSED', async () => {
    const e = await Engine.open({ path: torchscriptModel('tiny-llama') });
    await e.close();
    await expect(e.answer(ok)).rejects.toMatchObject({ code: 'ENGINE_CLOSED' });
  });
});
