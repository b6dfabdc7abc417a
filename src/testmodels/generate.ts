/** Writes a generated test model as an HF checkpoint folder. */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { fillNormal } from '../common/prng';
import { NamedTensor, writeSafetensors } from './safetensors-writer';
import { familyConfig, finalNorm, layerTensors, modelTypes } from './families';
import { TestModelSpec, testModels } from './specs';
import { projectRoot } from '../common/project-root';

/** Default location of generated models: <project>/models/<name>. */
export const modelsDir = path.join(projectRoot, 'models');
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
  const h = spec.hiddenSize;
  const out: NamedTensor[] = [normal('model.embed_tokens.weight', [spec.vocabSize, h])];
  for (let i = 0; i < spec.layers; i++) out.push(...layerTensors(spec, i, normal, norm));
  out.push(finalNorm(spec, normal, norm));
  if (!spec.tieEmbeddings) out.push(normal('lm_head.weight', [spec.vocabSize, h]));
  if (spec.vision) out.push(...visionTensors(spec, normal, norm));
  if (spec.vision?.layout === 'v5') {
    for (const t of out) t.name = t.name.replace(/^model\./, 'model.language_model.').replace(/^visual\./, 'model.visual.');
  }
  return out;
}

/** The vision tower (Qwen2-VL's, or Qwen2.5-VL's), with norm biases and linear biases that are not zero. */
function visionTensors(spec: TestModelSpec, normal: (n: string, s: number[], std?: number) => NamedTensor, norm: (n: string, s: number) => NamedTensor) {
  const v = spec.vision!;
  const E = v.embedDim, hidden = v.qwen25 ? v.qwen25.intermediateSize : E * v.mlpRatio, merged = E * 4;
  const bias = (name: string, size: number) => normal(name, [size], 0.1);
  // Qwen2.5-VL's RMSNorms have no bias.
  const normWithBias = (name: string) => (v.qwen25 ? [norm(name + '.weight', E)] : [norm(name + '.weight', E), bias(name + '.bias', E)]);
  const out: NamedTensor[] = [normal('visual.patch_embed.proj.weight', [E, 3, 2, 14, 14], 0.03)];
  for (let i = 0; i < v.depth; i++) {
    const p = `visual.blocks.${i}.`;
    out.push(...normWithBias(p + 'norm1'), normal(p + 'attn.qkv.weight', [3 * E, E], 0.2), bias(p + 'attn.qkv.bias', 3 * E));
    out.push(normal(p + 'attn.proj.weight', [E, E], 0.2), bias(p + 'attn.proj.bias', E), ...normWithBias(p + 'norm2'));
    if (v.qwen25) {
      out.push(normal(p + 'mlp.gate_proj.weight', [hidden, E], 0.2), bias(p + 'mlp.gate_proj.bias', hidden));
      out.push(normal(p + 'mlp.up_proj.weight', [hidden, E], 0.2), bias(p + 'mlp.up_proj.bias', hidden));
      out.push(normal(p + 'mlp.down_proj.weight', [E, hidden], 0.1), bias(p + 'mlp.down_proj.bias', E));
    } else {
      out.push(normal(p + 'mlp.fc1.weight', [hidden, E], 0.2), bias(p + 'mlp.fc1.bias', hidden), normal(p + 'mlp.fc2.weight', [E, hidden], 0.1), bias(p + 'mlp.fc2.bias', E));
    }
  }
  out.push(...normWithBias('visual.merger.ln_q'));
  out.push(normal('visual.merger.mlp.0.weight', [merged, merged], 0.1), bias('visual.merger.mlp.0.bias', merged));
  out.push(normal('visual.merger.mlp.2.weight', [spec.hiddenSize, merged], 0.1), bias('visual.merger.mlp.2.bias', spec.hiddenSize));
  return out;
}

/** A vision-language config.json in transformers 4's shape (text fields at the top) or 5's (text_config). */
function visionLanguageConfig(spec: TestModelSpec, text: Record<string, unknown>): Record<string, unknown> {
  const v = spec.vision!;
  const common = { depth: v.depth, num_heads: v.heads, patch_size: 14, temporal_patch_size: 2, spatial_merge_size: 2, [v.layout === 'v5' ? 'in_channels' : 'in_chans']: 3 };
  // Qwen2.5-VL names the ViT's width hidden_size and the text model's out_hidden_size; Qwen2-VL, embed_dim and hidden_size.
  const vision_config = v.qwen25
    ? { ...common, hidden_size: v.embedDim, out_hidden_size: spec.hiddenSize, intermediate_size: v.qwen25.intermediateSize, hidden_act: 'silu',
        window_size: v.qwen25.windowSize, fullatt_block_indexes: v.qwen25.fullAttentionBlocks, tokens_per_second: 2 }
    : { ...common, embed_dim: v.embedDim, hidden_size: spec.hiddenSize, mlp_ratio: v.mlpRatio, hidden_act: 'quick_gelu' };
  const ids = { vision_start_token_id: 151652, vision_end_token_id: 151653, vision_token_id: 151654, image_token_id: 151655, video_token_id: 151656 };
  const { rope_theta, rope_scaling: _unused, sliding_window: _window, use_sliding_window: _use, ...rest } = text;
  const top = { architectures: [spec.architecture], model_type: modelTypes[spec.architecture], tie_word_embeddings: spec.tieEmbeddings, vision_config, ...ids };
  if (v.layout === 'v4') return { ...rest, ...top, rope_theta, rope_scaling: { type: 'mrope', mrope_section: v.mropeSection } };
  const textType = `${modelTypes[spec.architecture]}_text`;
  return { ...top, text_config: { ...rest, model_type: textType, rope_parameters: { rope_type: 'default', rope_theta, mrope_section: v.mropeSection } } };
}

function hfConfig(spec: TestModelSpec): Record<string, unknown> {
  const text = {
    architectures: [spec.architecture],
    model_type: modelTypes[spec.architecture],
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
    attention_bias: spec.architecture === 'Qwen2ForCausalLM' || spec.architecture === 'Qwen2MoeForCausalLM' || spec.vision !== undefined,
    sliding_window: spec.slidingWindow ?? null,
    use_sliding_window: spec.slidingWindow !== undefined,
    bos_token_id: spec.bosTokenId,
    eos_token_id: spec.eosTokenId,
    torch_dtype: { F32: 'float32', BF16: 'bfloat16', F16: 'float16' }[spec.storedDtype],
    tqserve_test_model: `random weights N(0, ${spec.std}), seed ${spec.seed}: not a trained model`,
    ...familyConfig(spec),
  };
  return spec.vision ? visionLanguageConfig(spec, text) : text;
}

/**
 * The generator's TypeScript sources (this file and families.ts), whether this runs compiled (dist/)
 * or through ts-node: hashed from the running file, the compiled server and the tests disagreed on
 * every model, and each start of one regenerated what the other had written (0.5 s of tiny-qwen3's
 * start to /ready).
 */
function generatorSource(): Buffer {
  return Buffer.concat(
    ['generate', 'families'].map((name) => {
      const source = path.join(projectRoot, 'src', 'testmodels', `${name}.ts`);
      return fs.readFileSync(fs.existsSync(source) ? source : path.join(__dirname, `${name}.js`));
    }),
  );
}

function specHash(spec: TestModelSpec): string {
  return crypto.createHash('sha256').update(JSON.stringify(spec)).update(generatorSource()).digest('hex').slice(0, 16);
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
  const tokDir = path.join(projectRoot, 'node_modules', spec.tokenizerPackage, 'models');
  fs.copyFileSync(path.join(tokDir, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(tokDir, 'tokenizer_config.json'), 'utf8'));
  if (spec.chatTemplate) tokenizerConfig.chat_template = spec.chatTemplate;
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig, null, 2));
  fs.writeFileSync(stamp, JSON.stringify({ hash, spec }, null, 2));
  return dir;
}
