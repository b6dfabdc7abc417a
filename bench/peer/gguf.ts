/**
 * Writes a GGUF v3 file of an HF Llama or Mixtral checkpoint (BF16/F32 safetensors), so
 * llama.cpp evaluates the same weights as tqserve. Layout: header, metadata,
 * tensor infos (dims innermost first), 32-byte aligned tensor data. Mixtral is llama.cpp's
 * llama architecture with experts (expert_count, expert_used_count): its router as
 * ffn_gate_inp (F32, as llama.cpp's converter keeps it) and each layer's experts stacked
 * into ffn_gate_exps / ffn_up_exps ({hidden, width, experts}) and ffn_down_exps.
 */
import * as fs from 'fs';
import * as path from 'path';

const enum ValueType { UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7, STRING = 8, ARRAY = 9 }
const GGML_F32 = 0;
const GGML_BF16 = 30;
const GGML_Q8_0 = 8;
const ALIGN = 32;

type Meta = [string, ValueType, unknown, ValueType?];

class Writer {
  private parts: Buffer[] = [];
  size = 0;
  push(b: Buffer) {
    this.parts.push(b);
    this.size += b.length;
  }
  u32(v: number) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b); }
  i32(v: number) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
  u64(v: number) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  f32(v: number) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
  str(s: string) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  value(type: ValueType, v: unknown, elem?: ValueType) {
    switch (type) {
      case ValueType.UINT32: return this.u32(v as number);
      case ValueType.INT32: return this.i32(v as number);
      case ValueType.FLOAT32: return this.f32(v as number);
      case ValueType.BOOL: return this.push(Buffer.from([v ? 1 : 0]));
      case ValueType.STRING: return this.str(v as string);
      case ValueType.ARRAY: {
        const arr = v as unknown[];
        this.u32(elem!);
        this.u64(arr.length);
        for (const e of arr) this.value(elem!, e);
        return;
      }
    }
  }
  pad() { const n = (ALIGN - (this.size % ALIGN)) % ALIGN; if (n) this.push(Buffer.alloc(n)); }
  concat() { return Buffer.concat(this.parts); }
}

interface StTensor { dtype: string; shape: number[]; data: Buffer }

function readSafetensors(file: string): Map<string, StTensor> {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const out = new Map<string, StTensor>();
  for (const [name, info] of Object.entries<any>(header)) {
    if (name === '__metadata__') continue;
    out.set(name, { dtype: info.dtype, shape: info.shape, data: buf.subarray(8 + n + info.data_offsets[0], 8 + n + info.data_offsets[1]) });
  }
  return out;
}

/** HF rotate-half Q/K rows to llama.cpp's interleaved pairs: reshape(heads, 2, hd/2, in).swapaxes(1, 2). */
function permuteRows(t: StTensor, heads: number): Buffer {
  const [rows, cols] = t.shape;
  const hd = rows / heads, el = t.data.length / (rows * cols), rowBytes = cols * el;
  const out = Buffer.alloc(t.data.length);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < hd / 2; i++)
      for (let j = 0; j < 2; j++) {
        const src = h * hd + j * (hd / 2) + i, dst = h * hd + i * 2 + j;
        t.data.copy(out, dst * rowBytes, src * rowBytes, (src + 1) * rowBytes);
      }
  return out;
}

function toF32(t: StTensor): Buffer {
  if (t.dtype === 'F32') return t.data;
  if (t.dtype !== 'BF16') throw new Error(`unsupported dtype ${t.dtype}`);
  const out = Buffer.alloc(t.data.length * 2);
  for (let i = 0; i < t.data.length / 2; i++) out.writeUInt32LE((t.data.readUInt16LE(2 * i) << 16) >>> 0, 4 * i);
  return out;
}

/** IEEE half from a float (round to nearest even; the scales here are normal halves). */
function toHalf(v: number): number {
  const f = new Float32Array([v]), u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000, exp = ((u >>> 23) & 0xff) - 127 + 15;
  let mant = u & 0x7fffff;
  if (exp <= 0) return sign;  // below the normal halves: 0 (no scale here is that small)
  const round = mant & 0x1fff, half = mant >>> 13;
  let h = (exp << 10) | half;
  if (round > 0x1000 || (round === 0x1000 && (half & 1))) h += 1;
  return sign | h;
}
/**
 * Q8_0 as llama.cpp's quantize writes it (ggml's quantize_row_q8_0_ref): per block of 32 values of a
 * row, d = max|x| / 127 as a half, then the 32 values round(x / d) as int8; 34 bytes a block.
 */
function toQ8_0(t: StTensor, data: Buffer): Buffer {
  const f32 = toF32({ ...t, data });
  const n = f32.length / 4, out = Buffer.alloc((n / 32) * 34);
  for (let b = 0; b < n / 32; b++) {
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(f32.readFloatLE(4 * (b * 32 + i))));
    const d = amax / 127, id = d ? 1 / d : 0;
    out.writeUInt16LE(toHalf(d), b * 34);
    for (let i = 0; i < 32; i++) {
      const v = f32.readFloatLE(4 * (b * 32 + i)) * id;
      out.writeInt8(Math.sign(v) * Math.round(Math.abs(v)), b * 34 + 2 + i);  // roundf: halves away from 0
    }
  }
  return out;
}

/**
 * Writes `<dir>/model.gguf` (architecture llama) unless it exists; returns its path. q8_0: the layers'
 * linear weights as Q8_0 instead (`<dir>/model-q8_0.gguf`): what an operator serving llama.cpp on a CPU
 * runs; the embeddings and output stay BF16, as tqserve's int8 keeps them in the compute dtype.
 */
export function writeLlamaGguf(dir: string, o: { q8_0?: boolean } = {}): string {
  const out = path.join(dir, o.q8_0 ? 'model-q8_0.gguf' : 'model.gguf');
  if (fs.existsSync(out)) return out;
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const mixtral = cfg.architectures[0] === 'MixtralForCausalLM';
  if (cfg.architectures[0] !== 'LlamaForCausalLM' && !mixtral) throw new Error('writeLlamaGguf: Llama and Mixtral checkpoints only');
  const st = readSafetensors(path.join(dir, 'model.safetensors'));
  const tok = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  const vocab: string[] = [];
  for (const [t, id] of Object.entries<number>(tok.model.vocab)) vocab[id] = t;
  for (const a of tok.added_tokens) vocab[a.id] = a.content;
  const special = new Set(tok.added_tokens.map((a: any) => a.content));
  const tokenType = vocab.map((t) => (t === '<unk>' ? 2 : special.has(t) ? 3 : /^<0x[0-9A-F]{2}>$/.test(t) ? 6 : 1));
  const headDim = cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads;
  const meta: Meta[] = [
    ['general.architecture', ValueType.STRING, 'llama'],
    ['general.name', ValueType.STRING, path.basename(dir)],
    ['general.alignment', ValueType.UINT32, ALIGN],
    ['llama.context_length', ValueType.UINT32, cfg.max_position_embeddings],
    ['llama.embedding_length', ValueType.UINT32, cfg.hidden_size],
    ['llama.block_count', ValueType.UINT32, cfg.num_hidden_layers],
    ['llama.feed_forward_length', ValueType.UINT32, cfg.intermediate_size],
    ['llama.attention.head_count', ValueType.UINT32, cfg.num_attention_heads],
    ['llama.attention.head_count_kv', ValueType.UINT32, cfg.num_key_value_heads],
    ['llama.rope.freq_base', ValueType.FLOAT32, cfg.rope_theta],
    ['llama.rope.dimension_count', ValueType.UINT32, headDim],
    ['llama.attention.layer_norm_rms_epsilon', ValueType.FLOAT32, cfg.rms_norm_eps],
    ['llama.vocab_size', ValueType.UINT32, cfg.vocab_size],
    ...(mixtral
      ? ([['llama.expert_count', ValueType.UINT32, cfg.num_local_experts], ['llama.expert_used_count', ValueType.UINT32, cfg.num_experts_per_tok]] as Meta[])
      : []),
    ['tokenizer.ggml.model', ValueType.STRING, 'llama'],
    ['tokenizer.ggml.tokens', ValueType.ARRAY, vocab, ValueType.STRING],
    // Scores follow merge ranks (lower id = earlier merge) so SentencePiece merging is sane;
    // the benchmark feeds token ids directly, so tokenization never decides a result.
    ['tokenizer.ggml.scores', ValueType.ARRAY, vocab.map((_, i) => -i), ValueType.FLOAT32],
    ['tokenizer.ggml.token_type', ValueType.ARRAY, tokenType, ValueType.INT32],
    ['tokenizer.ggml.bos_token_id', ValueType.UINT32, cfg.bos_token_id],
    ['tokenizer.ggml.eos_token_id', ValueType.UINT32, cfg.eos_token_id],
    ['tokenizer.ggml.unknown_token_id', ValueType.UINT32, 0],
    ['tokenizer.ggml.add_bos_token', ValueType.BOOL, false],
  ];
  const tensors: { name: string; dims: number[]; type: number; data: Buffer }[] = [];
  const get = (hf: string) => {
    const t = st.get(hf);
    if (!t) throw new Error(`missing ${hf}`);
    return t;
  };
  // f32: kept in F32 (norms; a router, whose choice Q8_0 would move).
  const push = (gguf: string, t: StTensor, data: Buffer, f32 = false) => {
    if (f32) tensors.push({ name: gguf, dims: [...t.shape].reverse(), type: GGML_F32, data: toF32({ ...t, data }) });
    else if (o.q8_0 && gguf.startsWith('blk.')) tensors.push({ name: gguf, dims: [...t.shape].reverse(), type: GGML_Q8_0, data: toQ8_0(t, data) });
    else tensors.push({ name: gguf, dims: [...t.shape].reverse(), type: t.dtype === 'F32' ? GGML_F32 : GGML_BF16, data });
  };
  const add = (gguf: string, hf: string, permuteHeads?: number) => {
    const t = get(hf);
    push(gguf, t, permuteHeads ? permuteRows(t, permuteHeads) : t.data, t.shape.length === 1);
  };
  // A layer's experts' weights of one kind, stacked: [experts, rows, cols].
  const stacked = (p: string, which: string): StTensor => {
    const parts = Array.from({ length: cfg.num_local_experts }, (_, e) => get(`${p}block_sparse_moe.experts.${e}.${which}.weight`));
    return { dtype: parts[0].dtype, shape: [parts.length, ...parts[0].shape], data: Buffer.concat(parts.map((t) => t.data)) };
  };
  add('token_embd.weight', 'model.embed_tokens.weight');
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`, b = `blk.${i}.`;
    add(b + 'attn_norm.weight', p + 'input_layernorm.weight');
    add(b + 'attn_q.weight', p + 'self_attn.q_proj.weight', cfg.num_attention_heads);
    add(b + 'attn_k.weight', p + 'self_attn.k_proj.weight', cfg.num_key_value_heads);
    add(b + 'attn_v.weight', p + 'self_attn.v_proj.weight');
    add(b + 'attn_output.weight', p + 'self_attn.o_proj.weight');
    add(b + 'ffn_norm.weight', p + 'post_attention_layernorm.weight');
    if (mixtral) {
      const router = get(p + 'block_sparse_moe.gate.weight');
      push(b + 'ffn_gate_inp.weight', router, router.data, true);
      for (const [gguf, hf] of [['ffn_gate_exps', 'w1'], ['ffn_up_exps', 'w3'], ['ffn_down_exps', 'w2']]) {
        const t = stacked(p, hf);
        push(`${b}${gguf}.weight`, t, t.data);
      }
      continue;
    }
    add(b + 'ffn_gate.weight', p + 'mlp.gate_proj.weight');
    add(b + 'ffn_up.weight', p + 'mlp.up_proj.weight');
    add(b + 'ffn_down.weight', p + 'mlp.down_proj.weight');
  }
  add('output_norm.weight', 'model.norm.weight');
  add('output.weight', st.has('lm_head.weight') ? 'lm_head.weight' : 'model.embed_tokens.weight');

  const w = new Writer();
  w.push(Buffer.from('GGUF', 'ascii'));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(meta.length);
  for (const [k, type, v, elem] of meta) { w.str(k); w.u32(type); w.value(type, v, elem); }
  let offset = 0;
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.dims.length);
    t.dims.forEach((d) => w.u64(d));
    w.u32(t.type);
    w.u64(offset);
    offset += t.data.length + ((ALIGN - (t.data.length % ALIGN)) % ALIGN);
  }
  w.pad();
  const fd = fs.openSync(out + '.tmp', 'w');
  fs.writeSync(fd, w.concat());
  for (const t of tensors) {
    fs.writeSync(fd, t.data);
    const pad = (ALIGN - (t.data.length % ALIGN)) % ALIGN;
    if (pad) fs.writeSync(fd, Buffer.alloc(pad));
  }
  fs.closeSync(fd);
  fs.renameSync(out + '.tmp', out);
  return out;
}
