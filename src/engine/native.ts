/**
 * The native surface of the engine addon (csrc/addon/addon.cpp), declared once.
 * Everything else goes through the typed wrapper in ./engine.ts.
 */
import { addonCandidates, builtAddon } from '../common/built-addon';

export type Dtype = 'fp32' | 'bf16';
export type TokenIds = Int32Array | readonly number[];

/** Instruction set levels of the engine's own CPU kernels, highest first. */
export const isaLevels = ['avx512-bf16', 'avx512', 'avx2', 'generic'] as const;
export type IsaLevel = (typeof isaLevels)[number];

export type Quantization = 'none' | 'int8' | 'fp8';

export interface NativeLoadOptions {
  /** HF checkpoint folder (config.json + safetensors) or a TorchScript .pt file. */
  path: string;
  dtype?: Dtype;
  /** torch intra-op threads; 0 or absent keeps torch's default. */
  threads?: number;
  /** KV cache block size in tokens (default 16). */
  blockSize?: number;
  /** KV cache capacity in tokens (default twice the context limit). */
  cacheTokens?: number;
  /** Largest number of tokens computed in one forward step (default 2048). */
  maxStepTokens?: number;
  /**
   * A test instrument (csrc/kernels/shifted_layer_kernels.h): the engine's CPU kernels read their operands this many bytes
   * past a 64-byte boundary, a multiple of 4 from 0 (the default, for serving) to 64. Answers must not change with it.
   */
  bufferShift?: number;
  /** Longest prompt (state + one question) in tokens (default 32768). */
  contextLimit?: number;
  /** KV cache budget in MiB; overrides cacheTokens. */
  cacheMiB?: number;
  /**
   * On CUDA with neither cacheTokens nor cacheMiB: the KV cache's share, in (0, 1], of the device
   * memory the weights leave free (default 0: twice the context limit, as on the CPU).
   */
  gpuMemoryUtilization?: number;
  /** Reuse the KV of state prefixes across requests (default true). */
  prefixCache?: boolean;
  /** When a state's partial last block enters the prefix cache: `after` (on registerBoundary, default) or `before` (in the call). */
  registerBoundary?: 'after' | 'before';
  /**
   * Kernels whose result for a row does not depend on the rest of the batch (default true): a question's
   * logits are bit-identical alone, in any batch, cached or cold. false: oneDNN's kernels (faster on CPUs with bf16 instructions).
   */
  batchInvariant?: boolean;
  /**
   * On CUDA, batch-invariant, bf16: our own few-row GEMM's tilings (csrc/kernels/cuda/few_rows_mma.h) among the forms a GEMM
   * of at most 256 rows is measured in, taken where fastest and keeping a cold state's bits (csrc/kernels/aten/few_rows_gemm.h).
   * Refused elsewhere. Default false, until a GPU has run it.
   */
  ownGemm?: boolean;
  /** Where weights, KV cache and forward pass live: 'cpu' (default), 'cuda' or 'cuda:N' (a CUDA build only). */
  device?: string;
  /**
   * Whose ops run the layers: 'engine' (the engine's own CPU kernels, the CPU default), 'aten' (ATen's
   * device-generic ops: CUDA's with fp8 weights; on the CPU, a check of that path) or 'fused' (ATen's GEMMs, the
   * engine's fused row kernels and the cascade: the GPU's fast path and CUDA's default, csrc/kernels/fused/; on the
   * CPU their host forms, a check of that path). Absent: by device.
   */
  kernels?: 'engine' | 'aten' | 'fused';
  /**
   * How attention is computed: 'direct' (each query over all the keys it sees in one softmax, by the layer kernels;
   * 'kernels', its older name, is still read) or 'cascade' (tiers merged by log-sum-exp, csrc/kernels/cascade/: the
   * GPU's form; on the CPU over a plain fp32 reference, for checking it). Absent: cascade with the fused kernels,
   * direct otherwise.
   */
  attention?: 'direct' | 'kernels' | 'cascade';
  /**
   * What computes a question's attention in the cascade (its rows over its state's keys, and over its shared segment
   * and itself): 'varlen', the kernel of the states' own runs, the keys and values gathered first (FlashAttention-2 or
   * the memory-efficient kernel on CUDA, the plain reference on the CPU); or 'split-key', our kernel that reads them in
   * place in the KV cache, the questions' own runs planned in a tier of their own (on the CPU its host twin: the same
   * arithmetic). With the cascade only. Absent: 'varlen'.
   */
  stateAttention?: 'varlen' | 'split-key';
  /**
   * Steps of up to 4,096 tokens padded to fixed shapes of tokens and keys (csrc/batch/step_buckets.h), for CUDA graphs. On the CPU
   * the padded steps run eagerly: a check that padding changes no answer bit. Absent: true with the fused kernels on
   * CUDA, false otherwise.
   */
  cudaGraphs?: boolean;
  /**
   * The CUDA graphs a fixed-shape step is cut into between layers, at most (1 to 8; csrc/runner/step_graphs.h): the first
   * holds one layer and each next twice the one before, so the device starts on the first while the host launches the
   * rest. Above 1 with cudaGraphs and the cascade only; on the CPU the cuts are checked with the step's launches. Absent: 1.
   */
  cudaGraphChunks?: number;
  /**
   * The highest instruction set level the engine's own CPU kernels may use (csrc/kernels/cpu/isa.h):
   * 'avx512-bf16' (bf16 GEMMs on vdpbf16ps), 'avx512', 'avx2' or 'generic' ('portable', its older name, is still read). Absent: the best this CPU
   * has, capped by the environment variable TQ_KERNELS (same names) or TQ_PORTABLE_KERNELS=1. A level
   * the CPU lacks gives the best it has; `kernels` in the engine's info says which ran.
   */
  isa?: IsaLevel;
  /**
   * How the linear layers' weights are stored (csrc/kernels/quantization.h): 'none' (default, the
   * compute dtype), 'int8' (per output channel, activations per row; the engine's CPU kernels, on
   * AVX-512 VNNI where the CPU has it) or 'fp8' (CUDA, compute capability 8.9+; refused on the CPU).
   */
  quantization?: Quantization;
  /**
   * 'portable' (default): the same bits on every x86 CPU, level and thread count (docs/arithmetic.md). 'native': the
   * bf16 linear layers on AMX tiles (Intel Xeons from Sapphire Rapids on): faster, exact in any batch, but bits of AMX
   * machines alone. bf16, batchInvariant and no quantization only; refused on a CPU without AMX-BF16.
   */
  arithmetic?: 'portable' | 'native';
  /** A vision-language model's cache of vision-tower outputs by image key, in MiB (default 256). */
  visionCacheMiB?: number;
}

/** A vision-language checkpoint's vision tower (Qwen2-VL, Qwen2.5-VL) and its image token ids. */
export interface NativeVisionInfo {
  depth: number;
  embedDim: number;
  heads: number;
  mlpRatio: number;
  /** The MLP's width (Qwen2-VL: embedDim * mlpRatio). */
  intermediateSize: number;
  /** Qwen2.5-VL's attention windows, in pixels (0: attention over the whole image). */
  windowSize: number;
  patchSize: number;
  temporalPatchSize: number;
  mergeSize: number;
  outHidden: number;
  visionStartId: number;
  visionEndId: number;
  imagePadId: number;
}

/** An image decoded and sized by the preprocessing recipe (src/images/preprocess.ts). */
export interface NativeImage {
  /** Raw RGB, height x width x 3; sides multiples of 28. */
  rgb: Uint8Array;
  width: number;
  height: number;
  /** 64 hex digits: SHA-256 of the pixels, size, recipe and model (the prefix cache's and vision cache's key). */
  key: string;
}

/** The device the engine runs on (csrc/runner/device.h). */
export interface NativeDeviceInfo {
  mode: 'cpu' | 'cuda';
  /** The GPU's name, or 'cpu'. */
  name: string;
  totalBytes: number;
  freeBytes: number;
  capability?: string;
  cudaVersion?: string;
  torchVersion: string;
}

export interface NativeEngineInfo {
  format: 'hf' | 'torchscript';
  architecture: string;
  dtype: Dtype;
  storedDtype: string;
  /** Set when the requested dtype could not be used on this CPU: what runs instead and why. */
  dtypeNote?: string;
  vocabSize: number;
  hiddenSize: number;
  contextLimit: number;
  blockSize: number;
  cacheBlocks: number;
  cacheBytes: number;
  /** What sized the KV cache: 'mib', 'tokens', 'gpu-memory' (CUDA) or 'context' (twice the context limit); absent for TorchScript. */
  cacheSizedBy?: 'mib' | 'tokens' | 'gpu-memory' | 'context';
  gpuMemoryUtilization: number;
  threads: number;
  /**
   * The layers' kernels: the engine's own CPU kernels by instruction set level, 'avx512-bf16' (bf16 only:
   * an fp32 engine on such a CPU says 'avx512'), 'avx512', 'avx2' or 'generic' (see `isa`); 'aten'
   * (ATen's ops, on any device); or 'libtorch' (TorchScript).
   */
  kernels: string;
  /**
   * How the CPU kernels' level was chosen (csrc/kernels/cpu/level_choice.h): 'measured' at load, 'cached' (measured
   * before on this machine), 're-measured' (after load: Engine.remeasureLevel), 'forced' (isa, TQ_KERNELS) or 'only'
   * (one level runs here); whether the machine was busy while it was measured (the choice is then provisional, and
   * measured again); the rounds measured now (0 unless measured now: fewer than the most where one level led
   * decisively); and each level's rate on the model's GEMMs (GFLOP/s). Every level gives the same bits: the choice is
   * one of speed alone. Absent off the engine's CPU kernels.
   */
  levelChoice?: { how: 'measured' | 'cached' | 're-measured' | 'forced' | 'only'; busy: boolean; rounds: number; gflops: Record<string, number> };
  /** 'direct' or 'cascade' (NativeLoadOptions.attention). */
  attention: 'direct' | 'cascade';
  /** NativeLoadOptions.stateAttention, with the cascade; absent without it. */
  stateAttention?: 'varlen' | 'split-key';
  /** NativeLoadOptions.cudaGraphs. */
  cudaGraphs: boolean;
  /** NativeLoadOptions.cudaGraphChunks. */
  cudaGraphChunks: number;
  quantization: Quantization;
  /** NativeLoadOptions.arithmetic: which arithmetic answers. */
  arithmetic: 'portable' | 'native';
  /** int8: the int8 GEMM's path: 'amx-int8' (AMX tiles), 'avx512-vnni', 'avx2' or 'generic', all with the same bits. */
  quantizedKernels?: string;
  /** Reading the weights and preparing them for the kernels (packing, quantizing) at load. */
  weightsMs: number;
  /** The layers' linear weights as the kernels keep them (packed or quantized), in bytes; 0 for TorchScript. */
  linearBytes: number;
  device: NativeDeviceInfo;
  prefixCache: boolean;
  batchInvariant: boolean;
  /** NativeLoadOptions.ownGemm. */
  ownGemm: boolean;
  registerBoundary: string;
  /** Present for a vision-language checkpoint. */
  vision?: NativeVisionInfo;
  /** An HF checkpoint's parameters, embeddings included: in all, and those a token computes with (a MoE model's k experts). */
  parameters?: number;
  activeParameters?: number;
  /** Present for a mixture of experts (csrc/model/moe.h): its experts, the top k of them a token is routed to, their widths. */
  moe?: { experts: number; expertsPerToken: number; expertIntermediateSize: number; sharedExpertIntermediateSize: number };
}

export interface NativeQuestion {
  tokens: TokenIds;
  /** Token ids of the option labels, read at the readout position. */
  labelIds: TokenIds;
  /** Index into `tokens` of the readout position; default the last token. */
  readoutIndex?: number;
  /** Temperature of labelLogProbs (default 1). */
  temperature?: number;
}

export interface NativeAnswerRequest {
  /** With images: one image pad token (vision.imagePadId) per image, where it stands. */
  state: TokenIds;
  images?: NativeImage[];
  questions: NativeQuestion[];
  /** Also return the final hidden state at each readout position. */
  wantHidden?: boolean;
  /** A tenant's cache salt: the state's prefix-cache blocks and a batch's shared state computation are its own (csrc/cache/block_pool.h). */
  cacheSalt?: string;
}

export interface NativeAnswer {
  labelLogits: Float32Array;
  /** log softmax(labelLogits / temperature), from the same readout (on CUDA, its kernel). */
  labelLogProbs: Float32Array;
  hidden?: Float32Array;
}

export interface NativeAnswerResult {
  answers: NativeAnswer[];
  /** planMs: the host's work before the call's steps ran (checked, packed, planned, arrays moved to the device). */
  timing: { stateMs: number; questionsMs: number; readoutMs: number; planMs: number };
  stateTokens: number;
  questionTokens: number;
  /** State tokens that came from the prefix cache (not computed). */
  cachedTokens: number;
  /** Tokens the whole call computed (shared by the requests of a batch). */
  computedTokens: number;
  /** Padding tokens its steps computed besides, padded to fixed shapes (cudaGraphs); 0 otherwise. */
  paddingTokens: number;
  /** Its steps that replayed a CUDA graph an earlier step captured (cudaGraphs with the cascade; on the CPU: ran from the graph's buffers, their launches checked). */
  graphReplays: number;
  /** A state boundary waiting for registerBoundary(ticket), or -1. */
  boundaryTicket: number;
  /** Launched while the call before it was still unfinished: its host work overlapped that call's device work (csrc/addon/engine_thread.h). */
  overlapped: boolean;
}

export interface NativeCacheStats {
  lookups: number;
  hitTokens: number;
  missTokens: number;
  hitBlocks: number;
  registeredBlocks: number;
  evictedBlocks: number;
  cachedBlocks: number;
  freeBlocks: number;
  totalBlocks: number;
  /** Distinct cache salts whose prefixes hold cached blocks. */
  salts: number;
}

export interface NativeVisionCacheStats {
  hits: number;
  misses: number;
  entries: number;
  bytes: number;
  budgetBytes: number;
}

/** What the engine keeps besides the weights and the KV cache; all of it bounded. */
export interface NativeMemoryStats {
  /** Worker threads' attention buffers, between steps at most attentionBufferKeptBytes per thread. */
  attentionBufferBytes: number;
  attentionBufferKeptBytes: number;
  /** oneDNN primitives kept (batch invariance off), at most cachedPrimitivesMax. */
  cachedPrimitives: number;
  cachedPrimitivesMax: number;
  /** State boundaries awaiting registerBoundary. */
  pendingBoundaries: number;
}

export interface NativeEngine {
  load(options: NativeLoadOptions): Promise<NativeEngineInfo>;
  /**
   * Answers the requests in one forward pass (a batch). Requests with identical states share one
   * computation of the state. Timings are those of the whole call. Validation is all or nothing.
   */
  answerBatch(requests: NativeAnswerRequest[]): Promise<NativeAnswerResult[]>;
  /** Full-vocabulary logits at every position, row-major [tokens, vocabSize]. For reference checks. */
  logitsAll(tokens: TokenIds, images?: NativeImage[]): Promise<{ logits: Float32Array; vocabSize: number }>;
  /** Enters a pending state boundary into the prefix cache; false when it was dropped under memory pressure. */
  registerBoundary(ticket: number): Promise<boolean>;
  cacheStats(): Promise<NativeCacheStats>;
  /** The vision-tower output cache's counters (zeros for a text model). */
  visionCacheStats(): Promise<NativeVisionCacheStats>;
  /** Both caches' counters as the last answered call left them, at once (no job for the engine thread); undefined before the first. */
  cachesAfterLastCall(): { stats: NativeCacheStats; vision: NativeVisionCacheStats } | undefined;
  memoryStats(): Promise<NativeMemoryStats>;
  remeasureLevel(): Promise<NativeEngineInfo>;
  /** How long the engine thread spins for the next call after each one before it sleeps (0, the default: at once). */
  setBusyPoll(ms: number): void;
  /** How many times the engine thread has gone to sleep with nothing queued (each time, the next call waited for its wake-up). */
  threadSleeps(): number;
  /** How many calls the engine thread launched while the call before was still unfinished (csrc/addon/engine_thread.h). */
  callsOverlapped(): number;
  close(): Promise<void>;
}

/** Stable codes of engine errors (csrc/common/errors.h). */
export type EngineErrorCode =
  | 'CHECKPOINT_INVALID'
  | 'CHECKPOINT_MISSING_TENSOR'
  | 'CHECKPOINT_TENSOR_SHAPE'
  | 'CHECKPOINT_TRUNCATED'
  | 'UNKNOWN_ARCHITECTURE'
  | 'CONTEXT_OVERFLOW'
  | 'BAD_REQUEST'
  | 'KV_CACHE_CAPACITY'
  | 'ENGINE_NOT_LOADED'
  | 'ENGINE_CLOSED'
  | 'TORCH_ERROR'
  | 'INTERNAL';

export interface EngineError extends Error {
  code: EngineErrorCode;
  details: Record<string, number>;
}

/** Not `instanceof Error`: errors made by the addon may come from another realm (e.g. jest's vm). */
export function isEngineError(e: unknown): e is EngineError {
  return typeof e === 'object' && e !== null && typeof (e as Partial<EngineError>).code === 'string' && typeof (e as Partial<EngineError>).message === 'string';
}


/**
 * How long libgomp's threads spin at a barrier before they sleep (GOMP_SPINCOUNT, read when the addon loads, so set
 * here before the require; a value set by the user wins). libgomp's default, 300,000 turns (about 3 ms), keeps them
 * spinning after a call ends, on the cores the server's process needs. 1,000 turns (this default before) is shorter
 * than the engine thread's own work between two parallel regions, so they slept and were woken hundreds of times a
 * call. 10,000 spans those gaps without outlasting a call: bench/README.md, "OpenMP's spin", has the measurements.
 */
export const defaultSpinCount = '10000';

/** Loads the most recently built addon. */
export function loadAddon(): { NativeEngine: new () => NativeEngine } {
  process.env.GOMP_SPINCOUNT ??= defaultSpinCount;
  const built = builtAddon('tqserve_engine');
  if (!built) throw new Error(`the engine addon is not built (looked for ${addonCandidates('tqserve_engine').join(', ')}); run: npm run build:addon`);
  return require(built);
}
