/**
 * Start-up flags: one table gives each flag's name, kind, default and help; `--help` prints it. A flag the engine
 * takes names its load option (`engine`): engineLoad (engine-load.ts) carries it there, for the server's engine
 * processes and `decide` alike.
 */
import type { NativeLoadOptions } from '../engine/native';

type Kind = 'string' | 'number' | 'boolean' | 'choice';

export interface FlagDef {
  name: string;
  kind: Kind;
  default?: string | number | boolean;
  choices?: readonly string[];
  /** Older names of choices, still read (each given as its choice's name). */
  aliases?: Readonly<Record<string, string>>;
  help: string;
  /** The engine's load option this flag sets (an on/off flag as a boolean); unset, the engine chooses (by device). */
  engine?: keyof NativeLoadOptions;
}

const table = [
  { name: 'host', kind: 'string', default: '127.0.0.1', help: 'address to listen on' },
  { name: 'port', kind: 'number', default: 8000, help: 'port to listen on' },
  { name: 'base', kind: 'string', default: 'qwen3-0.6b', help: 'a named base (qwen3-0.6b, llama3.2-1b, mistral-7b, gemma3-1b, phi4-mini, olmo2-1b, smollm3-3b; mixtures of experts qwen3-30b-a3b, mixtral-8x7b, qwen1.5-moe-a2.7b), a test model (tiny-qwen3, tiny-llama, tiny-qwen3-moe, ...), or a checkpoint folder' },
  { name: 'models-dir', kind: 'string', default: 'models', help: 'folder searched for named bases (<dir>/<base name>/ or <dir>/<org>--<repo>/) before the Hugging Face cache' },
  { name: 'served-name', kind: 'string', help: "the model name the server reports (default: the base's own)" },
  { name: 'dtype', kind: 'choice', choices: ['bf16', 'fp32'], default: 'bf16', help: 'compute dtype of the engine', engine: 'dtype' },
  { name: 'threads', kind: 'number', default: 0, help: 'engine threads (0: one per core)', engine: 'threads' },
  { name: 'temperature-noul', kind: 'number', help: "temperature for yes/no questions (default: the base's)" },
  { name: 'temperature-choice', kind: 'number', help: "temperature for choice questions (default: the base's)" },
  { name: 'temperature-score', kind: 'number', help: "temperature for score questions (default: the base's)" },
  { name: 'layout', kind: 'choice', choices: ['state-first', 'question-first'], help: "prompt layout (default: the base's); state-first shares the state between questions" },
  { name: 'template', kind: 'choice', choices: ['chat', 'plain'], help: "chat template of the checkpoint, or plain text (default: the base's)" },
  { name: 'system-turn', kind: 'string', help: 'system turn text, or "none" (default: the base\'s)' },
  { name: 'answer-position', kind: 'choice', choices: ['cue', 'turn-start'], help: 'read the label after an "Answer:" cue, or at the start of the assistant turn' },
  { name: 'choice-labels', kind: 'choice', choices: ['letters', 'digits', 'keys'], help: "labels of choice options; keys = the request's own keys when each is one token" },
  { name: 'score-labels', kind: 'choice', choices: ['letters', 'digits'], help: 'labels of score levels' },
  { name: 'yes-no', kind: 'choice', choices: ['words', 'letters'], help: 'yes/no questions as Yes/No words or lettered options' },
  { name: 'options-position', kind: 'choice', choices: ['after', 'before'], help: "the option list after the question's instructions, or before them (questions sharing an option list then share its computation)" },
  { name: 'prefix-cache', kind: 'choice', choices: ['on', 'off'], default: 'on', help: 'reuse the KV of state prefixes across requests', engine: 'prefixCache' },
  { name: 'batch-invariant', kind: 'choice', choices: ['on', 'off'], default: 'on', help: "on: the engine's own kernels, a question's logits bit-identical alone, in any batch, cached or cold; off: oneDNN's kernels (faster where the CPU has bf16 instructions, answers may differ in the last bits with the batch)", engine: 'batchInvariant' },
  { name: 'arithmetic', kind: 'choice', choices: ['portable', 'native'], default: 'portable', help: "portable: answers the same bits on every x86 CPU, kernel level and thread count (docs/arithmetic.md); native: bf16 linear layers on AMX tiles (Intel Xeon from Sapphire Rapids on), faster, still identical in any batch, but bits of AMX machines alone (bf16, no quantization; refused elsewhere)", engine: 'arithmetic' },
  { name: 'quantization', kind: 'choice', choices: ['none', 'int8', 'fp8'], default: 'none', help: "the linear layers' weights: none (the compute dtype), int8 (per output channel, activations per token; CPU, fastest on AVX-512 VNNI; answers still identical in any batch) or fp8 (CUDA, compute capability 8.9+: e4m3 on the tensor cores); tasks fitted under another quantization are refused", engine: 'quantization' },
  { name: 'attention', kind: 'choice', choices: ['direct', 'cascade'], aliases: { kernels: 'direct' }, help: "how attention is computed: direct (each query over all the keys it sees in one softmax, by the layer kernels; 'kernels' is its older name) or cascade (tiers merged by log-sum-exp: the GPU's form, on the CPU over a plain fp32 reference, for checking it; docs/gpu.md). Default: cascade with the fused forward (CUDA's), direct otherwise", engine: 'attention' },
  { name: 'state-attention', kind: 'choice', choices: ['varlen', 'split-key'], help: "what computes a question's attention in the cascade (its rows over its state's keys, and over its own): varlen (the kernel of the states' own runs, the keys and values gathered first: FlashAttention-2 on CUDA) or split-key (our kernel, reading them in place in the KV cache, the questions' own runs in a tier of their own; on the CPU its host twin, the same arithmetic; docs/gpu.md). With the cascade only. Default: varlen", engine: 'stateAttention' },
  { name: 'cuda-forward', kind: 'choice', choices: ['aten', 'fused'], help: "the forward pass's kernels: fused (the engine's fused row kernels and cascade attention over FlashAttention-2; CUDA's default, docs/gpu.md) or aten (ATen's ops: cuBLAS, SDPA with masks; CUDA's with --quantization fp8). Without the flag the CPU runs the engine's own kernels; given there, it runs that path on the CPU (a check of it)", engine: 'kernels' },
  { name: 'own-gemm', kind: 'choice', choices: ['on', 'off'], help: "on CUDA with --batch-invariant on and bf16: our own few-row GEMM kernel's tilings among the forms a GEMM of at most 256 rows is measured in at its first call, taken where it is the fastest that keeps a cold state's bits (docs/gpu.md, \"The GEMM on few rows\"); refused elsewhere. Default: off", engine: 'ownGemm' },
  { name: 'cuda-graph-chunks', kind: 'number', help: "cut each CUDA graph step into up to this many graphs between layers (1 to 8; default 1: one graph a step), the first of one layer and each next twice the one before, so that the GPU starts on the first while the host launches the rest (with --cuda-graphs on and the cascade; docs/gpu.md)", engine: 'cudaGraphChunks' },
  { name: 'cuda-graphs', kind: 'choice', choices: ['on', 'off'], help: 'pad steps of up to 4,096 tokens (a warm question to a cold state\'s prefill) to fixed shapes of tokens and keys, for CUDA graphs (default: on with the fused forward on CUDA, off otherwise); on the CPU the padded steps run eagerly (answers unchanged, a check of the padding; docs/gpu.md)', engine: 'cudaGraphs' },
  { name: 'device', kind: 'string', default: 'cpu', help: 'where the engine runs: cpu, cuda or cuda:N (a CUDA build of the engine: docs/gpu.md); a list of GPUs (cuda:0,cuda:1) runs one engine process on each, behind this one address', engine: 'device' },
  { name: 'engines', kind: 'number', help: "engine processes serving the model behind this one address, each with its own prefix cache: a state's requests go to the engine that holds it (docs/operations.md, \"Several engines\"); one engine's death costs only its requests in flight, and it is restarted. On the CPU each takes its share of the cores (--threads 0). Default: 1, or one per device of a --device list" },
  { name: 'register-boundary', kind: 'choice', choices: ['after', 'before'], default: 'after', help: "when a state's partial last block enters the prefix cache: after the response is sent, or before the question is computed", engine: 'registerBoundary' },
  { name: 'cache-mib', kind: 'number', default: 0, help: 'KV cache memory budget in MiB (0: room for twice the 32,768-token context on the CPU; on CUDA, --gpu-memory-utilization); the least recently used prefixes are evicted to stay within it', engine: 'cacheMiB' },
  { name: 'gpu-memory-utilization', kind: 'number', default: 0.9, help: "on CUDA without --cache-mib: the KV cache takes this share of the GPU memory the weights leave free at start, in (0, 1] (as vLLM's flag of that name)", engine: 'gpuMemoryUtilization' },
  { name: 'batch-tokens', kind: 'number', default: 16384, help: 'requests that queue while the engine is busy are merged into one forward pass up to this many tokens (0: no merging)' },
  { name: 'busy-poll-ms', kind: 'number', help: "after a message between the server and an engine process, both spin this long on their shared-memory channel before they sleep, so that a request crosses without waking a process (about 0.5 ms each way on a VM), and with a CUDA device the engine's thread as long after each call, so that the next finds it awake; at the price of cores busy while they spin (0: never; at most 60000; docs/operations.md). Default: 20 with a CUDA device (longer than a client's turn between requests); 0 on the CPU, whose cores compute the answers" },
  { name: 'calls-in-flight', kind: 'number', help: "merged calls an engine process hands its engine at once, 1 or 2: with 2 the engine prepares and launches the next call while the device still runs the one before (its host work and the device's overlap; the same answers, bit for bit; docs/operations.md). Default: 2 with a CUDA device; 1 on the CPU, where preparing is computing and the call before would wait for it" },
  { name: 'tasks', kind: 'choice', choices: ['on', 'off'], default: 'on', help: 'apply registered tasks (calibrations, intent heads) to matching questions' },
  { name: 'tasks-file', kind: 'string', help: 'keep the registered tasks in this file: loaded at start (tasks fitted under another fingerprint refused and listed), rewritten atomically after every change under its lock, and reloaded when another process (a replica sharing it) replaces it' },
  { name: 'head-engine', kind: 'string', help: "read intent heads' hidden states from a second engine process running this base or checkpoint folder (default: the serving engine); its death is an engine death" },
  { name: 'image-model', kind: 'string', help: 'answer requests with images with a second engine process running this vision-language base (qwen2-vl-2b, qwen2.5-vl-3b, the test models tiny-qwen2-vl, tiny-qwen2.5-vl) or Qwen2-VL / Qwen2.5-VL checkpoint folder; its death is an engine death (default: none, images get 400)' },
  { name: 'image-max-tokens', kind: 'number', default: 1024, help: "the most tokens one image may become: the recipe's pixel budget is this many 28x28 squares (smart_resize keeps the aspect ratio within it)" },
  { name: 'vision-cache-mib', kind: 'number', default: 256, help: "memory for the image engine's cache of vision-tower outputs by image content (0: none)" },
  { name: 'abstain-option', kind: 'string', help: 'the abstention extension: append an option with this text to every choice and yes/no question; answers then carry unknown_probability and abstained (default rule: abstain when that option is the most probable)' },
  { name: 'abstention', kind: 'choice', choices: ['on', 'off'], default: 'on', help: "let registered abstention tasks' thresholds decide abstained; off: the default rule decides, with the same abstain options asked and the same probabilities" },
  { name: 'debug-readout', kind: 'boolean', default: false, help: 'honour the x-service-debug request header (raw readout in responses)' },
  { name: 'cache-salt-header', kind: 'string', help: "read a request's cache salt from this header when it sends no x-cache-salt (a tenant header an authenticating proxy already sets): requests under different salts never share cached work (docs/operations.md, \"Multi-tenant serving\")" },
  { name: 'cors-origin', kind: 'string', help: 'let browser pages on this origin (or * for any) call the server: answers preflights, sets Access-Control-Allow-* (default: off)' },
  { name: 'log-level', kind: 'choice', choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info', help: 'the least severe level of the JSON log lines written to stdout' },
  { name: 'log-bodies', kind: 'boolean', default: false, help: 'also log each request body (states and questions are never logged without it)' },
  { name: 'shutdown-timeout', kind: 'number', default: 30, help: 'on SIGTERM or SIGINT, how many seconds in-flight and queued requests get to finish before the server exits (a second signal exits at once)' },
  { name: 'exit-grace-ms', kind: 'number', default: 1000, help: 'after the engine dies, answer 503 this long, then exit with code 70' },
] as const satisfies readonly FlagDef[];

/** The table, for reading row by row (help, parsing, the docs test). */
export const flagDefs: readonly FlagDef[] = table;

type Def = (typeof table)[number];
/** A flag's value type from its row: number, boolean, the union of its choices, or string. */
type ValueOf<D> = D extends { kind: 'number' } ? number : D extends { kind: 'boolean' } ? boolean : D extends { choices: readonly (infer C)[] } ? C : string;
/** The parsed flags, typed from the table: a flag with a default always has a value. */
export type Flags = { [D in Def as D['name']]: D extends { default: unknown } ? ValueOf<D> : ValueOf<D> | undefined } & { help?: boolean };

export class FlagError extends Error {}

export function parseFlags(argv: string[]): Flags {
  const flags: Record<string, string | number | boolean | undefined> = {};
  for (const d of flagDefs) flags[d.name] = d.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new FlagError(`unexpected argument ${JSON.stringify(arg)} (flags start with --; see --help)`);
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    if (name === 'help') {
      flags.help = true;
      continue;
    }
    const def = flagDefs.find((d) => d.name === name);
    if (!def) throw new FlagError(`unknown flag --${name} (see --help)`);
    let value: string | undefined = eq < 0 ? undefined : arg.slice(eq + 1);
    if (def.kind === 'boolean') {
      flags[name] = value === undefined ? true : value === 'true' || value === '1';
      continue;
    }
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new FlagError(`--${name} needs a value`);
    }
    if (def.kind === 'number') {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw new FlagError(`--${name} must be a number, got ${JSON.stringify(value)}`);
      flags[name] = n;
    } else if (def.kind === 'choice' && !def.choices!.includes(value) && !def.aliases?.[value]) {
      throw new FlagError(`--${name} must be one of ${def.choices!.join(', ')}, got ${JSON.stringify(value)}`);
    } else if (def.kind === 'choice') {
      flags[name] = def.aliases?.[value] ?? value;
    } else {
      flags[name] = value;
    }
  }
  return checked(flags as Flags);
}

/** The rules between a flag's value and its kind. */
function checked(flags: Flags): Flags {
  const port = flags.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new FlagError(`--port must be an integer from 0 to 65535, got ${port}`);
  const devices = flags.device.split(',');
  if (devices.length > 1 ? !devices.every((d) => /^cuda:\d+$/.test(d)) || new Set(devices).size < devices.length : !/^(cpu|cuda(:\d+)?)$/.test(flags.device))
    throw new FlagError(`--device must be cpu, cuda or cuda:N, or a list of distinct GPUs (cuda:0,cuda:1), got ${JSON.stringify(flags.device)}`);
  const engines = flags.engines;
  if (engines !== undefined && !(Number.isInteger(engines) && engines >= 1 && engines <= 64)) throw new FlagError(`--engines must be an integer from 1 to 64, got ${engines}`);
  if (engines !== undefined && devices.length > 1 && engines !== devices.length)
    throw new FlagError(`--engines ${engines} does not match --device ${flags.device}: a device list runs one engine on each (${devices.length})`);
  if (!(flags['cache-mib'] >= 0)) throw new FlagError('--cache-mib must be 0 or more');
  const share = flags['gpu-memory-utilization'];
  if (!(share > 0 && share <= 1)) throw new FlagError(`--gpu-memory-utilization must be more than 0 and at most 1, got ${share}`);
  if (!Number.isInteger(flags['image-max-tokens']) || flags['image-max-tokens'] < 4) throw new FlagError('--image-max-tokens must be an integer of 4 or more (the smallest image is 4 tokens)');
  if (flags['busy-poll-ms'] !== undefined && !(flags['busy-poll-ms'] >= 0 && flags['busy-poll-ms'] <= MAX_BUSY_POLL_MS))
    throw new FlagError(`--busy-poll-ms must be from 0 to ${MAX_BUSY_POLL_MS}`);
  const inFlight = flags['calls-in-flight'];
  if (inFlight !== undefined && inFlight !== 1 && inFlight !== 2) throw new FlagError(`--calls-in-flight must be 1 or 2, got ${inFlight}`);
  if (!(flags['shutdown-timeout'] >= 0)) throw new FlagError('--shutdown-timeout must be 0 or more seconds');
  if (!(flags['vision-cache-mib'] >= 0)) throw new FlagError('--vision-cache-mib must be 0 or more');
  if (flags['abstain-option'] !== undefined && !flags['abstain-option'].trim()) throw new FlagError('--abstain-option must not be blank');
  for (const t of ['temperature-noul', 'temperature-choice', 'temperature-score'] as const) {
    const value = flags[t];
    if (value !== undefined && !(value > 0)) throw new FlagError(`--${t} must be positive`);
  }
  return flags;
}

/** --busy-poll-ms, or its default by device: spin beside a GPU, never where the cores compute. */
export function busyPollMs(flags: Flags): number {
  return flags['busy-poll-ms'] ?? (flags.device.startsWith('cuda') ? GPU_BUSY_POLL_MS : 0);
}
const GPU_BUSY_POLL_MS = 20;
/** The longest spin the engine's thread takes (csrc/addon/addon.cpp, setBusyPoll). */
const MAX_BUSY_POLL_MS = 60_000;

/** --calls-in-flight, or its default by device: beside a GPU the next call is launched while the device runs one. */
export function callsInFlight(flags: Flags): 1 | 2 {
  return (flags['calls-in-flight'] ?? (flags.device.startsWith('cuda') ? 2 : 1)) as 1 | 2;
}

/** The device of each serving engine process: one per entry of a --device list, else --engines copies of --device. */
export function engineDevices(flags: Flags): string[] {
  const devices = flags.device.split(',');
  return devices.length > 1 ? devices : Array(flags.engines ?? 1).fill(flags.device);
}

export function helpText(): string {
  const rows = flagDefs.map((d) => {
    const value = d.kind === 'boolean' ? '' : d.kind === 'choice' ? ` <${d.choices!.join('|')}>` : ` <${d.kind}>`;
    const def = d.default === undefined ? '' : ` (default: ${d.default})`;
    return `  --${d.name}${value}\n      ${d.help}${def}`;
  });
  return ['Usage: tqserve serve [flags]    (or: npm start -- [flags])', '', 'Flags:', ...rows, '  --help\n      this text'].join('\n');
}
