/**
 * The Koa application, outermost first: request ids, error bodies, CORS (when
 * asked for), the dead-engine gate, body parsing, then the routes.
 */
import Router from '@koa/router';
import Koa from 'koa';
import { HttpError } from './http-error';
import { jsonBodies } from './http/body';
import { cors } from './http/cors';
import { errorBodies } from './http/errors';
import { requestIds } from './http/request-id';
import { answerRoute } from './routes/answer';
import { answerDeadHealth, infoRoutes, RETRY_AFTER_DEAD_S } from './routes/info';
import { systemoneRoute } from './routes/systemone';
import { taskRoutes } from './routes/tasks';
import { abstentionRoutes } from './routes/abstention';
import { Service } from './service';

export function createApp(service: Service): Koa {
  const app = new Koa();
  app.use(requestIds());
  app.use(errorBodies());
  if (service.corsOrigin) app.use(cors(service.corsOrigin));

  app.use(async (ctx, next) => {
    if (!service.deadReason) return next();
    if (ctx.path !== '/health') throw new HttpError(503, service.deadReason, { 'Retry-After': RETRY_AFTER_DEAD_S });
    answerDeadHealth(ctx, service.deadReason);
  });

  app.use(jsonBodies());
  const router = new Router();
  systemoneRoute(router, service);
  answerRoute(router, service);
  taskRoutes(router, service);
  abstentionRoutes(router, service);
  infoRoutes(router, service);
  app.use(router.routes());
  app.use(router.allowedMethods());
  app.on('error', (e) => console.error('[tqserve]', e));
  return app;
}
