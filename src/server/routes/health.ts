/**
 * GET /health's report (docs/api.md), one function per section: what runs (versions, device, kernels),
 * the prefix cache, the base, how prompts are rendered, what /v1/systemone applies (abstention, orders,
 * tasks), memory, and the request limits. The route (info.ts) gathers the engine processes' reports.
 */
import { version as tqserveVersion } from '../../../package.json';
import { NativeEngineInfo } from '../../engine/native';
import { MAX_OPTIONS } from '../../rendering/labels';
import { MAX_DEPTH } from '../../wire/validation';
import { CacheReport } from '../engine-process/protocol';
import { MAX_BODY_BYTES } from '../http/body';
import { Service } from '../service/service';

function versions(e: NativeEngineInfo) {
  return {
    tqserve: tqserveVersion, engine: `tqserve-engine (libtorch, ${e.format})`, node: process.version,
    libtorch: e.device.torchVersion, cuda: e.device.cudaVersion ?? null,
  };
}

/** The device, the dtype and the kernels that compute. */
function compute(e: NativeEngineInfo) {
  return {
    gpu: e.device.mode === 'cuda'
      ? { name: e.device.name, capability: e.device.capability, memory_total_bytes: e.device.totalBytes, memory_free_bytes_at_load: e.device.freeBytes }
      : null,
    mode: e.device.mode,
    dtype: e.dtype,
    ...(e.dtypeNote ? { dtype_note: e.dtypeNote } : {}),
    threads: e.threads,
    kernels: e.kernels,
    // The level is a matter of speed alone: every level gives the same bits (docs/arithmetic.md).
    ...(e.levelChoice
      ? { kernel_choice: { how: e.levelChoice.how, busy: e.levelChoice.busy, rounds: e.levelChoice.rounds, gflops: e.levelChoice.gflops, answers_depend_on_level: false } }
      : {}),
    attention: e.attention,
    ...(e.stateAttention ? { state_attention: e.stateAttention } : {}),
    cuda_graphs: e.cudaGraphs,
    cuda_graph_chunks: e.cudaGraphChunks,
    batch_invariant: e.batchInvariant,
    own_gemm: e.ownGemm,
    pad_unit: 1,
    pad_where: 'none',
    quantization: e.quantization,
    // Which arithmetic answers: portable (the same bits on every x86 CPU) or native (AMX's bf16 tiles, bits of AMX machines alone).
    arithmetic: e.arithmetic,
    ...(e.quantizedKernels ? { quantized_kernels: e.quantizedKernels } : {}),
    weights_load_ms: Math.round(e.weightsMs),
    linear_weight_bytes: e.linearBytes,
    cache_dtypes: { key: e.dtype, value: e.dtype },
  };
}

function prefixCache(e: NativeEngineInfo, { stats, boundaries }: CacheReport, cacheSaltHeader: string | undefined) {
  return {
    enabled: e.prefixCache,
    block_size: e.blockSize,
    match_unit: `block of ${e.blockSize} tokens; a registered state boundary matches to the token`,
    cache_hit_unit: `${e.blockSize} tokens, or the whole state once its boundary is registered`,
    hash_unit: `block of ${e.blockSize} tokens, chained (parent hash, token ids, model and dtype), verified against the stored tokens`,
    registers_state_boundary: e.prefixCache,
    register_boundary: e.registerBoundary,
    ...(e.registerBoundary === 'after' ? { state_boundary: boundaries } : {}),
    budget_bytes: e.cacheBytes,
    ...(e.cacheSizedBy ? { budget_from: e.cacheSizedBy } : {}),
    ...(e.cacheSizedBy === 'gpu-memory' ? { gpu_memory_utilization: e.gpuMemoryUtilization } : {}),
    blocks: { total: stats.totalBlocks, cached: stats.cachedBlocks, free: stats.freeBlocks, hit: stats.hitBlocks, registered: stats.registeredBlocks, evicted: stats.evictedBlocks },
    salts: { holding_blocks: stats.salts, header: 'x-cache-salt', fallback_header: cacheSaltHeader ?? null },
    tokens: { hit: stats.hitTokens, miss: stats.missTokens },
    lookups: stats.lookups,
  };
}

function baseModel(service: Service, e: NativeEngineInfo) {
  const { base } = service;
  return {
    name: base.profile.name,
    served_name: service.servedName,
    checkpoint: base.checkpoint,
    revision: base.revision,
    architecture: e.architecture,
    stored_dtype: e.storedDtype,
    ...(e.parameters ? { parameters: e.parameters, active_parameters: e.activeParameters } : {}),
    ...(e.moe
      ? { experts: { count: e.moe.experts, per_token: e.moe.expertsPerToken, intermediate_size: e.moe.expertIntermediateSize,
          shared_intermediate_size: e.moe.sharedExpertIntermediateSize || null } }
      : {}),
    random_weights: base.randomWeights,
    ...(base.note ? { note: base.note } : {}),
    engine_process: service.engineProcess,
  };
}

/** How a prompt is laid out (the profile's, and again in prompt_format). */
function prompt({ renderer }: Service) {
  const p = renderer.profile;
  return {
    layout: p.layout,
    template: renderer.usesChatTemplate ? 'chat' : 'plain',
    system_turn: renderer.usesChatTemplate ? p.systemTurn : null,
    answer_position: renderer.spacedLabels ? 'after the "Answer:" cue' : 'start of the assistant turn',
    label_forms: { choice: p.choiceLabels, score: p.scoreLabels, noul: p.yesNo },
    yes_no: p.yesNo === 'words' ? 'Yes/No words' : 'lettered options A. Yes / B. No',
    options: `label. key: description, in request order, ${p.optionsPosition} the instructions`,
    multi_question_scoring: 'one forward pass: the state once, each question attending to the state and itself',
    padding: 'none',
  };
}

function promptFormat(service: Service, e: NativeEngineInfo) {
  const { renderer } = service;
  return {
    ...prompt(service),
    context_limit: e.contextLimit,
    labels_available: { letters: renderer.letters.texts.length, digits: renderer.digits.texts.length, max_options: renderer.maxOptions, limit: MAX_OPTIONS },
    // Candidates that are not one token in context are skipped: Qwen's " 0" is two tokens, so its "digits" are letters.
    labels_first: { letters: renderer.letters.texts.slice(0, 12), digits: renderer.digits.texts.slice(0, 12), yes_no: renderer.yesNo.texts },
    labels_verified_in_context: true,
  };
}

function abstention({ abstentions, tasks }: Service) {
  // Justified tasks offer their abstain option whatever --abstention says; their thresholds decide only while it is on.
  const justified = tasks.abstentionList().filter((t) => t.applied).map((t) => t.id);
  return {
    abstain_option: abstentions.defaultOption ?? null,
    default_rule: 'abstain when the abstain option is more probable than every other option',
    thresholds_enabled: abstentions.enabled,
    tasks: { registered: tasks.abstentionList().length, options_offered: justified, applied: abstentions.enabled ? justified : [] },
    probabilities: "over the request's own keys: an appended abstain option's share is divided out",
  };
}

/** What /v1/systemone applies to a request beyond the model: rendering rules, abstention, orders, tasks. */
function systemone(service: Service) {
  const { tasks } = service;
  return {
    route: '/v1/systemone',
    rendering: {
      state: 'string as is; object as "key: value" lines; array item by item',
      instructions: 'objects and arrays as compact JSON; blank or absent: a default per type',
      entries: 'option descriptions, noul true/false and score levels may be strings, objects or arrays; non-strings as compact JSON',
      noul_criteria: 'the true/false descriptions are shown with the Yes/No options',
    },
    noul_commit: 'none: noul is P(yes), no threshold is applied',
    abstention: abstention(service),
    orders: { default: 1, allowed: [1, 2], two: 'options as sent and reversed, probabilities averaged' },
    tasks: {
      enabled: service.taskBook.enabled,
      registered: tasks.list().length,
      applied: tasks.list().filter((t) => t.applied !== 'none').map((t) => t.id),
      fingerprint: tasks.fingerprint.hash,
      file: tasks.file ?? null,
      refused_at_start: tasks.refused.length,
    },
    temperatures: service.temperatures,
  };
}

/** Everything the processes keep beyond the weights is bounded: these are its sizes now. */
function memoryNow(e: NativeEngineInfo, { memory }: CacheReport) {
  return {
    server_rss_bytes: process.memoryUsage.rss(),
    engine_rss_bytes: memory.rssBytes,
    // The V8 heaps' sizes, part of each RSS: V8 grows them before it collects.
    server_js_heap_bytes: process.memoryUsage().heapTotal,
    engine_js_heap_bytes: memory.jsHeapBytes,
    kv_cache_bytes: e.cacheBytes,
    attention_buffer_bytes: memory.attentionBufferBytes,
    attention_buffer_bytes_kept_max_per_thread: memory.attentionBufferKeptBytes,
    onednn_primitives: { cached: memory.cachedPrimitives, max: memory.cachedPrimitivesMax },
    pending_state_boundaries: memory.pendingBoundaries,
  };
}

function requestLimits({ corsOrigin, inflight }: Service) {
  return {
    cors_origin: corsOrigin ?? null,
    max_body_bytes: MAX_BODY_BYTES,
    max_nesting: MAX_DEPTH,
    joined_identical_in_flight: inflight.joined,
    dropped_client_gone: inflight.dropped,
  };
}

/**
 * Each serving engine process (--engines): where it runs, whether it answers, its restarts, its queue and its own cache
 * (its budget too: engines sharing one GPU size theirs from the first's, engine-process/device-shares.ts).
 */
function servingEngines({ engine: group }: Service, reports: (CacheReport | undefined)[]) {
  return {
    count: group.members.length,
    routing: group.members.length > 1 ? 'X-State-Key when sent, else the state\'s first tokens, on a hash ring; a deep queue spills to the least busy engine' : 'one engine',
    processes: group.members.map((m, i) => ({
      index: m.index,
      device: m.device,
      pid: m.client.pid,
      up: m.client.up,
      restarts: m.restarts,
      calls_outstanding: m.outstanding,
      cache_budget: { bytes: m.client.info.cacheBytes, from: m.client.info.cacheSizedBy ?? null },
      ...(reports[i] ? { cache_tokens: { hit: reports[i]!.stats.hitTokens, miss: reports[i]!.stats.missTokens }, rss_bytes: reports[i]!.memory.rssBytes } : {}),
    })),
  };
}

/**
 * The whole report, from the serving engines' `report` (summed over them) and each one's, and the image engine's
 * group (when there is one).
 */
export function healthReport(service: Service, report: CacheReport, members: (CacheReport | undefined)[], imageEngine: object | undefined) {
  const e = service.engineInfo;
  return {
    ok: true,
    engine: 'running',
    version: versions(e),
    ...compute(e),
    cache: prefixCache(e, report, service.cacheSaltHeader),
    base: baseModel(service, e),
    profile: { temperatures: service.temperatures, prompt: prompt(service) },
    prompt_format: promptFormat(service, e),
    systemone: systemone(service),
    engines: servingEngines(service, members),
    head_engine: service.headEngineReport,
    ...(imageEngine ? { image_engine: imageEngine } : {}),
    memory: memoryNow(e, report),
    requests: requestLimits(service),
  };
}
