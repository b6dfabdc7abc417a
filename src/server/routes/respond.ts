/**
 * How the answering routes respond: the request's computation is shared with
 * identical requests in flight and dropped when its clients have gone
 * (../inflight.ts); the engine's stages go out as `x-service-stages` and as
 * `Server-Timing` (which browsers' developer tools show).
 */
import { Context } from 'koa';
import { PipelineResult } from '../../answering/pipeline';
import { ErrorNames, toHttpError } from '../../answering/http-errors';
import { InFlight, SharedResponse } from '../service/inflight';
import { saltTag, serverTiming, stagesHeader } from '../service/request-headers';
import { Service } from '../service/service';

export interface Computed {
  body: object;
  result: Pick<PipelineResult, 'stages' | 'waitedBehindRegistration' | 'tasks' | 'inputTokens' | 'cachedTokens' | 'batchSize' | 'engine'>;
}

/** What an answering request is shared by, and how its errors name what it asked. */
export interface Sharing {
  route: 'text' | 'image';
  /** The honoured x-service-debug value, part of what makes two requests identical. */
  debug?: string;
  /** The request's cache salt, part of it too: two tenants never share a computation. */
  cacheSalt?: string;
  /** How errors name the questions (and images) the engine was asked. */
  names: ErrorNames;
}

export async function respondShared(ctx: Context, service: Service, { route, debug, cacheSalt, names }: Sharing, compute: (cancel: AbortSignal) => Promise<Computed>) {
  const clientGone = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) clientGone.abort();
  });
  const key = InFlight.key(`${ctx.path}#${route}`, debug, ctx.state.rawBody, cacheSalt);
  const { response, answeredBy } = await service.inflight.run(key, ctx.state.requestId, clientGone.signal, async (cancel): Promise<SharedResponse> => {
    let computed: Computed;
    try {
      computed = await compute(cancel);
    } catch (e) {
      throw toHttpError(e, names);
    }
    const r = computed.result;
    const headers: Record<string, string> = { 'x-service-route': route, 'x-service-stages': stagesHeader(r.stages), 'Server-Timing': serverTiming(r.stages) };
    if (r.waitedBehindRegistration) headers['x-service-wait-behind'] = 'registration';
    if (r.tasks.length) headers['x-service-tasks'] = r.tasks.join(',');
    if (r.engine !== undefined) headers['x-service-engine'] = String(r.engine);
    const answered = {
      service_route: route, input_tokens: r.inputTokens, cached_tokens: r.cachedTokens, batch_size: r.batchSize, tasks: r.tasks, stages: r.stages,
      ...(cacheSalt === undefined ? {} : { cache_salt: saltTag(cacheSalt) }),
      ...(r.engine === undefined ? {} : { engine: r.engine }),
    };
    return { headers, body: JSON.stringify(computed.body), answered };
  });
  ctx.state.answered = response.answered;
  ctx.set(response.headers);
  if (answeredBy !== ctx.state.requestId) ctx.set('x-service-joined', answeredBy);
  ctx.type = 'application/json';
  ctx.body = response.body;
}
