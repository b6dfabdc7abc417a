/** GET /v1/models and GET /health. */
import Router from '@koa/router';
import { Context } from 'koa';
import { version as tqserveVersion } from '../../../package.json';
import { MAX_OPTIONS } from '../../rendering/labels';
import * as fs from 'fs';
import * as path from 'path';
import { EngineDeadError } from '../../answering/engine-like';
import { MAX_BODY_BYTES } from '../http/body';
import { Service } from '../service/service';
import { MAX_DEPTH } from '../../wire/validation';
import { imageEngineHealth } from './image-health';

/** The format's model alias: hosted servers list it, and the official clients send it by default. */
const MODEL_ALIAS = 'jev-latest';

/** Seconds a client is told to wait after the engine died: the server exits, and a supervisor restarts it. */
export const RETRY_AFTER_DEAD_S = '5';

/** /health once the engine has died: 503 with the report (also answered by the dead-engine gate in app.ts). */
export function answerDeadHealth(ctx: Context, reason: string) {
  ctx.status = 503;
  ctx.set('Retry-After', RETRY_AFTER_DEAD_S);
  ctx.body = { ok: false, engine: 'dead', reason, exit_code: 70 };
}

/** The checkpoint's date (its config.json's modification day): the nearest thing to a release date a folder has. */
function checkpointDate(checkpoint: string): string {
  for (const file of [path.join(checkpoint, 'config.json'), checkpoint]) {
    try {
      return fs.statSync(file).mtime.toISOString().slice(0, 10);
    } catch {
      /* next */
    }
  }
  return new Date(0).toISOString().slice(0, 10);
}

export function infoRoutes(router: Router, service: Service) {
  const released = checkpointDate(service.base.checkpoint);
  router.get('/v1/models', (ctx) => {
    const { servedName, base } = service;
    ctx.body = {
      // The format's model list, which both official clients read.
      models: [
        { name: servedName, description: `${base.profile.name} (${base.checkpoint})${base.randomWeights ? ': random-weight test model, answers are meaningless' : ''}`, release_date: released },
        { name: MODEL_ALIAS, description: `alias: answered by ${servedName}, the one model this server serves`, release_date: released },
      ],
      // OpenAI-style, for generic tooling.
      object: 'list',
      data: [{ id: servedName, object: 'model', created: Math.floor(service.startedAt.getTime() / 1000), owned_by: 'tqserve' }],
    };
  });

  router.get('/health', async (ctx) => {
    const { base, renderer, engineInfo: e } = service;
    let report, imageEngine;
    try {
      report = await service.cacheReport();
      imageEngine = service.images && (await imageEngineHealth(service.images));
    } catch (e) {
      // The engine died while this call waited for its report.
      if (!(e instanceof EngineDeadError)) throw e;
      return answerDeadHealth(ctx, service.deadReason ?? e.message);
    }
    const { stats, boundaries, memory } = report;
    const p = renderer.profile;
    const prompt = {
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
    ctx.body = {
      ok: true,
      engine: 'running',
      version: {
        tqserve: tqserveVersion, engine: `tqserve-engine (libtorch, ${e.format})`, node: process.version,
        libtorch: e.device.torchVersion, cuda: e.device.cudaVersion ?? null,
      },
      gpu: e.device.mode === 'cuda'
        ? { name: e.device.name, capability: e.device.capability, memory_total_bytes: e.device.totalBytes, memory_free_bytes_at_load: e.device.freeBytes }
        : null,
      mode: e.device.mode,
      dtype: e.dtype,
      ...(e.dtypeNote ? { dtype_note: e.dtypeNote } : {}),
      threads: e.threads,
      kernels: e.kernels,
      ...(e.levelChoice ? { kernel_choice: { how: e.levelChoice.how, gflops: e.levelChoice.gflops } } : {}),
      attention: e.attention,
      cuda_graphs: e.cudaGraphs,
      batch_invariant: e.batchInvariant,
      pad_unit: 1,
      pad_where: 'none',
      quantization: e.quantization,
      ...(e.quantizedKernels ? { quantized_kernels: e.quantizedKernels } : {}),
      weights_load_ms: Math.round(e.weightsMs),
      linear_weight_bytes: e.linearBytes,
      cache_dtypes: { key: e.dtype, value: e.dtype },
      cache: {
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
        tokens: { hit: stats.hitTokens, miss: stats.missTokens },
        lookups: stats.lookups,
      },
      base: {
        name: base.profile.name,
        served_name: service.servedName,
        checkpoint: base.checkpoint,
        revision: base.revision,
        architecture: e.architecture,
        stored_dtype: e.storedDtype,
        random_weights: base.randomWeights,
        ...(base.note ? { note: base.note } : {}),
        engine_process: service.engineProcess,
      },
      profile: { temperatures: service.temperatures, prompt },
      prompt_format: {
        ...prompt,
        context_limit: e.contextLimit,
        labels_available: { letters: renderer.letters.texts.length, digits: renderer.digits.texts.length, max_options: renderer.maxOptions, limit: MAX_OPTIONS },
        // Candidates that are not one token in context are skipped: Qwen's " 0" is two tokens, so its "digits" are letters.
        labels_first: { letters: renderer.letters.texts.slice(0, 12), digits: renderer.digits.texts.slice(0, 12), yes_no: renderer.yesNo.texts },
        labels_verified_in_context: true,
      },
      systemone: {
        route: '/v1/systemone',
        rendering: {
          state: 'string as is; object as "key: value" lines; array item by item',
          instructions: 'objects and arrays as compact JSON; blank or absent: a default per type',
          entries: 'option descriptions, noul true/false and score levels may be strings, objects or arrays; non-strings as compact JSON',
          noul_criteria: 'the true/false descriptions are shown with the Yes/No options',
        },
        noul_commit: 'none: noul is P(yes), no threshold is applied',
        abstention: {
          abstain_option: service.abstentionBook.defaultOption ?? null,
          default_rule: 'abstain when the abstain option is more probable than every other option',
          thresholds_enabled: service.abstentionBook.enabled,
          tasks: {
            registered: service.tasks.abstentionList().length,
            // Justified tasks offer their abstain option whatever --abstention says; their thresholds decide only while it is on.
            options_offered: service.tasks.abstentionList().filter((t) => t.applied).map((t) => t.id),
            applied: service.abstentionBook.enabled ? service.tasks.abstentionList().filter((t) => t.applied).map((t) => t.id) : [],
          },
          probabilities: "over the request's own keys: an appended abstain option's share is divided out",
        },
        orders: { default: 1, allowed: [1, 2], two: 'options as sent and reversed, probabilities averaged' },
        tasks: {
          enabled: service.taskBook.enabled,
          registered: service.tasks.list().length,
          applied: service.tasks.list().filter((t) => t.applied !== 'none').map((t) => t.id),
          fingerprint: service.tasks.fingerprint.hash,
          file: service.tasks.file ?? null,
          refused_at_start: service.tasks.refused.length,
        },
        temperatures: service.temperatures,
      },
      head_engine: service.headEngineReport,
      ...(imageEngine ? { image_engine: imageEngine } : {}),
      // Everything the processes keep beyond the weights is bounded: these are its sizes now.
      memory: {
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
      },
      requests: {
        cors_origin: service.corsOrigin ?? null,
        max_body_bytes: MAX_BODY_BYTES,
        max_nesting: MAX_DEPTH,
        joined_identical_in_flight: service.inflight.joined,
        dropped_client_gone: service.inflight.dropped,
      },
    };
  });
}
