/**
 * `--cors-origin <origin|*>`: lets pages on that origin call the server from a
 * browser. Preflights are answered here (204); every response to an allowed
 * origin carries `Access-Control-Allow-Origin` and exposes the headers a page
 * wants to read (request id, stages, Server-Timing). Off by default.
 */
import { Middleware } from 'koa';

const exposed = ['x-typesafe-request-id', 'x-request-id', 'x-service-server-ms', 'x-service-route', 'x-service-stages', 'x-service-wait-behind', 'x-service-joined', 'server-timing', 'retry-after'];

export function cors(origin: string): Middleware {
  return async (ctx, next) => {
    if (origin !== '*') ctx.vary('Origin');
    const allowed = origin === '*' || ctx.get('origin') === origin;
    if (allowed) {
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.set('Access-Control-Expose-Headers', exposed.join(', '));
    }
    if (ctx.method === 'OPTIONS' && ctx.get('access-control-request-method')) {
      if (allowed) {
        ctx.set('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
        ctx.set('Access-Control-Allow-Headers', ctx.get('access-control-request-headers') || 'content-type');
        ctx.set('Access-Control-Max-Age', '600');
      }
      ctx.status = 204;
      return;
    }
    await next();
  };
}
