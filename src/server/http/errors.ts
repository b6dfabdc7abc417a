/**
 * Every error as JSON with a `detail` (http-error.ts), including what Koa and
 * the router answer on their own: an unknown route is 404; a known route asked
 * with a method it does not serve is 405 with `Allow`, also for methods the
 * router does not implement at all (PROPFIND, TRACE, MKCOL..., which it would
 * answer 501 with a text body).
 */
import { Middleware } from 'koa';
import { ClientGoneError } from '../../answering/engine-like';
import { HttpError } from '../../wire/http-error';
import { requestStart } from './request-id';

export function errorBodies(): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      const allow = ctx.response.get('Allow');
      if ((ctx.status === 404 && ctx.body === undefined) || (ctx.status === 501 && !allow)) throw new HttpError(404, `no route ${ctx.method} ${ctx.path}`);
      if (ctx.status === 405 || ctx.status === 501) throw new HttpError(405, `${ctx.method} is not allowed on ${ctx.path}; allowed: ${allow}`, { Allow: allow });
    } catch (e) {
      if (e instanceof HttpError) {
        ctx.status = e.status;
        ctx.body = { detail: e.detail };
        ctx.set(e.headers);
      } else if (e instanceof ClientGoneError) {
        // Nobody is left to read it; 499 as nginx logs a client that closed its request.
        ctx.status = 499;
        ctx.body = { detail: e.message };
      } else {
        ctx.status = 500;
        ctx.body = { detail: `internal error: ${e instanceof Error ? e.message : String(e)}` };
        ctx.app.emit('error', e, ctx);
      }
    }
    ctx.set('x-service-server-ms', (performance.now() - requestStart(ctx)).toFixed(2));
  };
}
