/** The Koa application: error handling, the dead-engine gate, body parsing and the routes. */
import Router from '@koa/router';
import Koa from 'koa';
import { koaBody } from 'koa-body';
import { HttpError } from './http-error';
import { answerRoute } from './routes/answer';
import { infoRoutes } from './routes/info';
import { systemoneRoute } from './routes/systemone';
import { Service } from './service';

export function createApp(service: Service): Koa {
  const app = new Koa();

  app.use(async (ctx, next) => {
    const t0 = performance.now();
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new HttpError(404, `no route ${ctx.method} ${ctx.path}`);
      if (ctx.status === 405) throw new HttpError(405, `${ctx.method} is not allowed on ${ctx.path}`);
    } catch (e) {
      if (e instanceof HttpError) {
        ctx.status = e.status;
        ctx.body = { detail: e.detail };
      } else {
        ctx.status = 500;
        ctx.body = { detail: `internal error: ${e instanceof Error ? e.message : String(e)}` };
        ctx.app.emit('error', e, ctx);
      }
    }
    ctx.set('x-service-server-ms', (performance.now() - t0).toFixed(1));
  });

  app.use(async (ctx, next) => {
    if (!service.deadReason) return next();
    ctx.status = 503;
    ctx.body = ctx.path === '/health' ? { ok: false, engine: 'dead', reason: service.deadReason, exit_code: 70 } : { detail: service.deadReason };
  });

  app.use(
    koaBody({
      json: true,
      jsonStrict: false,
      jsonLimit: '64mb',
      text: false,
      urlencoded: false,
      multipart: false,
      onError: (err) => {
        throw new HttpError(422, `body is not valid JSON: ${err.message}`);
      },
    }),
  );

  app.use(async (ctx, next) => {
    if (ctx.method === 'POST' && !ctx.is('application/json', '+json'))
      throw new HttpError(422, `body must be JSON sent with Content-Type: application/json (got ${ctx.get('content-type') || 'no Content-Type'})`);
    return next();
  });

  const router = new Router();
  systemoneRoute(router, service);
  answerRoute(router, service);
  infoRoutes(router, service);
  app.use(router.routes());
  app.use(router.allowedMethods());
  app.on('error', (e) => console.error('[tqserve]', e));
  return app;
}
