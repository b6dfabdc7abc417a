/** Writes a generated test model as an HF checkpoint folder. */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { fillNormal } from './prng';
import { NamedTensor, writeSafetensors } from './safetensors-writer';
import { TestModelSpec, testModels } from './specs';

/** Default location of generated models: <project>/models/<name>. */
export const modelsDir = path.resolve(__dirname, '..', '..', 'models');
const STAMP = 'tqserve-testmodel.json';

function tensorList(spec: TestModelSpec): NamedTensor[] {
  const normal = (name: string, shape: number[], std = spec.std, mean = 0): NamedTensor => ({
    name,
    shape,
    make: () => {
      const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
      fillNormal(data, spec.seed, name, std, mean);
      return data;
    },
  });
  const norm = (name: string, size: number) => normal(name, [size], 0.1, 1);
  const h = spec.hiddenSize, q = spec.heads * spec.headDim, kv = spec.kvHeads * spec.headDim;
  const out: NamedTensor[] = [normal('model.embed_tokens.weight', [spec.vocabSize, h])];
  for (let i = 0; i < spec.layers; i++) {
    const p = `model.layers.${i}.`;
    out.push(norm(p + 'input_layernorm.weight', h), norm(p + 'post_attention_layernorm.weight', h));
    out.push(normal(p + 'self_attn.q_proj.weight', [q, h]), normal(p + 'self_attn.k_proj.weight', [kv, h]));
    out.push(normal(p + 'self_attn.v_proj.weight', [kv, h]), normal(p + 'self_attn.o_proj.weight', [h, q]));
    if (spec.architecture === 'Qwen2ForCausalLM') {
      out.push(normal(p + 'self_attn.q_proj.bias', [q]), normal(p + 'self_attn.k_proj.bias', [kv]), normal(p + 'self_attn.v_proj.bias', [kv]));
    }
    if (spec.architecture === 'Qwen3ForCausalLM') {
      out.push(norm(p + 'self_attn.q_norm.weight', spec.headDim), norm(p + 'self_attn.k_norm.weight', spec.headDim));
    }
    out.push(normal(p + 'mlp.gate_proj.weight', [spec.intermediateSize, h]), normal(p + 'mlp.up_proj.weight', [spec.intermediateSize, h]));
    out.push(normal(p + 'mlp.down_proj.weight', [h, spec.intermediateSize]));
  }
  out.push(norm('model.norm.weight', h));
  if (!spec.tieEmbeddings) out.push(normal('lm_head.weight', [spec.vocabSize, h]));
  return out;
}

function hfConfig(spec: TestModelSpec): Record<string, unknown> {
  const modelType = { LlamaForCausalLM: 'llama', MistralForCausalLM: 'mistral', Qwen2ForCausalLM: 'qwen2', Qwen3ForCausalLM: 'qwen3' }[spec.architecture];
  return {
    architectures: [spec.architecture],
    model_type: modelType,
    vocab_size: spec.vocabSize,
    hidden_size: spec.hiddenSize,
    intermediate_size: spec.intermediateSize,
    num_hidden_layers: spec.layers,
    num_attention_heads: spec.heads,
    num_key_value_heads: spec.kvHeads,
    head_dim: spec.headDim,
    hidden_act: 'silu',
    max_position_embeddings: 32768,
    rope_theta: spec.ropeTheta,
    rope_scaling: spec.llama3RopeScaling
      ? { rope_type: 'llama3', factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192 }
      : null,
    rms_norm_eps: spec.rmsNormEps,
    tie_word_embeddings: spec.tieEmbeddings,
    attention_bias: spec.architecture === 'Qwen2ForCausalLM',
    sliding_window: spec.slidingWindow ?? null,
    use_sliding_window: spec.slidingWindow !== undefined,
    bos_token_id: spec.bosTokenId,
    eos_token_id: spec.eosTokenId,
    torch_dtype: { F32: 'float32', BF16: 'bfloat16', F16: 'float16' }[spec.storedDtype],
    tqserve_test_model: `random weights N(0, ${spec.std}), seed ${spec.seed}: not a trained model`,
  };
}

function specHash(spec: TestModelSpec): string {
  return crypto.createHash('sha256').update(JSON.stringify(spec)).update(fs.readFileSync(__filename)).digest('hex').slice(0, 16);
}

/** Generates the model unless an identical one (same spec and generator) is already there. Returns its folder. */
export function generateTestModel(name: string, dir = path.join(modelsDir, name)): string {
  const spec = testModels[name];
  if (!spec) throw new Error(`unknown test model ${name}; known: ${Object.keys(testModels).join(', ')}`);
  const hash = specHash(spec);
  const stamp = path.join(dir, STAMP);
  if (fs.existsSync(stamp) && JSON.parse(fs.readFileSync(stamp, 'utf8')).hash === hash) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const tensors = tensorList(spec);
  if (spec.shards === 1) {
    writeSafetensors(path.join(dir, 'model.safetensors'), tensors, spec.storedDtype);
  } else {
    const weightMap: Record<string, string> = {};
    const per = Math.ceil(tensors.length / spec.shards);
    for (let s = 0; s < spec.shards; s++) {
      const file = `model-${String(s + 1).padStart(5, '0')}-of-${String(spec.shards).padStart(5, '0')}.safetensors`;
      const part = tensors.slice(s * per, (s + 1) * per);
      part.forEach((t) => (weightMap[t.name] = file));
      writeSafetensors(path.join(dir, file), part, spec.storedDtype);
    }
    fs.writeFileSync(path.join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }, null, 2));
  }
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(hfConfig(spec), null, 2));
  const tokDir = path.resolve(__dirname, '..', '..', 'node_modules', spec.tokenizerPackage, 'models');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(tokDir, f), path.join(dir, f));
  fs.writeFileSync(stamp, JSON.stringify({ hash, spec }, null, 2));
  return dir;
}
