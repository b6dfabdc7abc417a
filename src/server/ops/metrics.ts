/**
 * GET /metrics (docs/operations.md): Prometheus text. The server's own counters and histograms
 * (requests by matched route, method and status; their duration; each engine stage; batch size;
 * prompt tokens computed and served from the prefix cache; tasks and abstention tasks applied),
 * each engine process's state read at scrape time without waiting for its engine (up, queue,
 * prefix cache, KV usage, state-boundary registrations, vision cache), and the default process
 * metrics of the server and of every engine process (labelled `process`). Label sets are bounded:
 * routes are the router's templates (`unmatched` otherwise), stages and engines are fixed lists.
 */
import { Middleware } from 'koa';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import { EngineClient } from '../engine-process/client';
import { MetricsReport } from '../engine-process/protocol';
import { requestStart } from '../http/request-id';
import { AnsweredFields, matchedRoute } from './access-log';
import { Family, formatFamilies, withLabels } from '../../common/prom-text';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** An engine process by its role: `text` (serving), `head` (--head-engine), `image` (--image-model). */
export type EngineRole = 'text' | 'head' | 'image';

export interface EngineSource {
  engine: EngineRole;
  /** Its place among several serving engines (--engines above 1); absent otherwise, so one engine's labels stay as they were. */
  index?: number;
  /** The process's client now (a restarted engine's is new). */
  readonly client: EngineClient;
}

/** An engine's labels: its role, and its index among several serving engines. */
const engineLabels = (e: EngineSource): Record<string, string> => (e.index === undefined ? { engine: e.engine } : { engine: e.engine, index: String(e.index) });

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const REPORT_TIMEOUT_MS = 2000;

export class Metrics {
  private readonly registry = new Registry();
  private readonly requests = new Counter({ name: 'tqserve_http_requests_total', help: 'HTTP requests answered, by matched route, method and status.', labelNames: ['route', 'method', 'status'], registers: [this.registry] });
  private readonly duration = new Histogram({ name: 'tqserve_http_request_duration_seconds', help: 'Time from receiving a request to its response, by matched route.', labelNames: ['route'], buckets: SECONDS, registers: [this.registry] });
  private readonly stages = new Histogram({
    name: 'tqserve_engine_stage_duration_seconds',
    help: 'Where answered requests spent their time (x-service-stages): prepare, warm, questions, readout, engine, wait, hop, plan.',
    labelNames: ['service_route', 'stage'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly batch = new Histogram({ name: 'tqserve_batch_size', help: 'Requests merged into the forward pass that answered each request.', labelNames: ['service_route'], buckets: [1, 2, 4, 8, 16, 32, 64], registers: [this.registry] });
  private readonly tokens = new Counter({ name: 'tqserve_prompt_tokens_total', help: 'Prompt tokens of answered requests: computed, or served from the prefix cache.', labelNames: ['service_route', 'source'], registers: [this.registry] });
  private readonly cacheRequests = new Counter({
    name: 'tqserve_prefix_cache_requests_total',
    help: 'Answered requests by whether they carried a cache salt (never its value) and whether the prefix cache served part of their state.',
    labelNames: ['service_route', 'salted', 'hit'],
    registers: [this.registry],
  });
  private readonly applied = new Counter({ name: 'tqserve_tasks_applied_total', help: 'Answered requests a registered task applied to, by kind (task or abstention).', labelNames: ['kind'], registers: [this.registry] });
  /** Reloads of a --tasks-file another replica replaced: `loaded`, or `unreadable` (the tasks kept as they were). */
  readonly tasksFileReloads = new Counter({ name: 'tqserve_tasks_file_reloads_total', help: 'Reloads of the --tasks-file after another process replaced it, by result (loaded or unreadable).', labelNames: ['result'], registers: [this.registry] });

  constructor(private readonly engines: EngineSource[]) {
    collectDefaultMetrics({ register: this.registry, labels: { process: 'server' } });
  }

  /** Counts each request once it is answered (errors included). */
  middleware(): Middleware {
    return async (ctx, next) => {
      try {
        await next();
      } finally {
        const route = matchedRoute(ctx) ?? 'unmatched';
        const labels = { route, method: ctx.method, status: String(ctx.status) };
        const seconds = (performance.now() - requestStart(ctx)) / 1000;
        const a = ctx.state.answered as AnsweredFields | undefined;
        // Counted just after the response goes out (as the access log is written): a request's dozen label lookups
        // are then not part of its time. They are counted in the same turn of the event loop, before the next
        // request is read, so a scrape after a response sees it.
        setImmediate(() => {
          this.requests.inc(labels);
          this.duration.observe({ route }, seconds);
          if (a) this.observeAnswer(a);
        });
      }
    };
  }

  private observeAnswer(a: AnsweredFields) {
    const service_route = a.service_route;
    for (const [stage, ms] of Object.entries(a.stages)) this.stages.observe({ service_route, stage }, ms / 1000);
    this.batch.observe({ service_route }, a.batch_size);
    this.tokens.inc({ service_route, source: 'cached' }, a.cached_tokens);
    this.tokens.inc({ service_route, source: 'computed' }, a.input_tokens - a.cached_tokens);
    this.cacheRequests.inc({ service_route, salted: a.cache_salt === undefined ? 'no' : 'yes', hit: a.cached_tokens > 0 ? 'yes' : 'no' });
    for (const t of a.tasks) this.applied.inc({ kind: t.startsWith('abstention:') ? 'abstention' : 'task' });
  }

  async render(): Promise<string> {
    const own = (await this.registry.getMetricsAsJSON()) as unknown as Family[];
    const reports = await Promise.all(this.engines.map((e) => report(e.client)));
    const families: Family[] = [...own, ...engineFamilies(this.engines, reports)];
    this.engines.forEach((e, i) => {
      const r = reports[i];
      if (r) families.push(...withLabels(r.process, { process: `${e.engine}_engine`, ...(e.index === undefined ? {} : { index: String(e.index) }) }));
    });
    return formatFamilies(families);
  }
}

/** An engine's report, or undefined when it is down or does not answer within REPORT_TIMEOUT_MS. */
async function report(client: EngineClient): Promise<MetricsReport | undefined> {
  if (!client.up) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), REPORT_TIMEOUT_MS)));
  try {
    return await Promise.race([client.metricsReport(), late]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

function engineFamilies(engines: EngineSource[], reports: (MetricsReport | undefined)[]): Family[] {
  const family = (name: string, type: string, help: string, values: Family['values']): Family => ({ name, type, help, values });
  const each = (pick: (r: MetricsReport, labels: Record<string, string>) => Family['values']) =>
    engines.flatMap((e, i) => (reports[i] ? pick(reports[i]!, engineLabels(e)) : []));
  const stat = (key: keyof NonNullable<MetricsReport['stats']>) => each((r, labels) => (r.stats ? [{ labels, value: r.stats[key] }] : []));
  return [
    family('tqserve_engine_up', 'gauge', 'Whether the engine process is alive and answering (1) or not (0).', engines.map((e, i) => ({ labels: engineLabels(e), value: reports[i] ? 1 : 0 }))),
    family('tqserve_engine_info', 'gauge', 'Each engine process as loaded (value 1): compute dtype, kernels, weight quantization.', engines.map((e) => ({
      labels: { ...engineLabels(e), dtype: e.client.info.dtype, kernels: e.client.info.kernels, quantization: e.client.info.quantization }, value: 1,
    }))),
    family('tqserve_engine_queue_depth', 'gauge', 'Answer calls waiting for the engine.', each((r, labels) => [{ labels, value: r.queued }])),
    family('tqserve_engine_busy', 'gauge', 'Whether the engine is computing an answer call now.', each((r, labels) => [{ labels, value: r.running ? 1 : 0 }])),
    family('tqserve_engine_calls_overlapped_total', 'counter', 'Merged calls the engine launched while the call before was still unfinished (--calls-in-flight 2).', each((r, labels) => [{ labels, value: r.overlapped }])),
    family('tqserve_prefix_cache_lookups_total', 'counter', 'States looked up in the prefix cache.', stat('lookups')),
    family('tqserve_prefix_cache_hit_tokens_total', 'counter', 'State tokens served from the prefix cache.', stat('hitTokens')),
    family('tqserve_prefix_cache_miss_tokens_total', 'counter', 'State tokens not found in the prefix cache.', stat('missTokens')),
    family('tqserve_prefix_cache_hit_blocks_total', 'counter', 'KV blocks served from the prefix cache.', stat('hitBlocks')),
    family('tqserve_kv_cache_registered_blocks_total', 'counter', 'KV blocks entered into the prefix cache.', stat('registeredBlocks')),
    family('tqserve_kv_cache_evicted_blocks_total', 'counter', 'Cached KV blocks whose contents were dropped for reuse.', stat('evictedBlocks')),
    family('tqserve_kv_cache_blocks', 'gauge', 'KV blocks by state: total, cached (holding a prefix), free (unreferenced).', each((r, labels) =>
      r.stats ? (['total', 'cached', 'free'] as const).map((state) => ({ labels: { ...labels, state }, value: r.stats![`${state}Blocks`] })) : [],
    )),
    family('tqserve_kv_cache_usage_ratio', 'gauge', 'Share of KV blocks referenced by requests in flight or waiting boundaries.', each((r, labels) =>
      r.stats && r.stats.totalBlocks ? [{ labels, value: (r.stats.totalBlocks - r.stats.freeBlocks) / r.stats.totalBlocks }] : [],
    )),
    family('tqserve_state_boundaries_total', 'counter', "States' partial last blocks registered after the response (--register-boundary after), by outcome.", each((r, labels) =>
      (['registered', 'dropped', 'failed', 'deferred'] as const).map((outcome) => ({ labels: { ...labels, outcome }, value: r.boundaries[outcome] })),
    )),
    family('tqserve_vision_cache_lookups_total', 'counter', "The image engine's vision-output cache, by result.", each((r, labels) =>
      r.vision ? [{ labels: { ...labels, result: 'hit' }, value: r.vision.hits }, { labels: { ...labels, result: 'miss' }, value: r.vision.misses }] : [],
    )),
  ].filter((f) => f.values.length > 0);
}
