/**
 * How the answering routes respond: the request's computation is shared with
 * identical requests in flight and dropped when its clients have gone
 * (../inflight.ts); the engine's stages go out as `x-service-stages` and as
 * `Server-Timing` (which browsers' developer tools show).
 */
import { Context } from 'koa';
import { InFlight, SharedResponse } from '../inflight';
import { serverTiming, stagesHeader } from '../request-headers';
import { Service } from '../service';

export interface Computed {
  body: object;
  stages: Record<string, number>;
  waitedBehindRegistration: boolean;
}

/** `debug`: the honoured x-service-debug value, part of what makes two requests identical. */
export async function respondShared(ctx: Context, service: Service, debug: string | undefined, compute: (cancel: AbortSignal) => Promise<Computed>) {
  const clientGone = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) clientGone.abort();
  });
  const key = InFlight.key(ctx.path, debug, ctx.state.rawBody);
  const { response, answeredBy } = await service.inflight.run(key, ctx.state.requestId, clientGone.signal, async (cancel): Promise<SharedResponse> => {
    const r = await compute(cancel);
    const headers: Record<string, string> = { 'x-service-route': 'text', 'x-service-stages': stagesHeader(r.stages), 'Server-Timing': serverTiming(r.stages) };
    if (r.waitedBehindRegistration) headers['x-service-wait-behind'] = 'registration';
    return { headers, body: JSON.stringify(r.body) };
  });
  ctx.set(response.headers);
  if (answeredBy !== ctx.state.requestId) ctx.set('x-service-joined', answeredBy);
  ctx.type = 'application/json';
  ctx.body = response.body;
}
