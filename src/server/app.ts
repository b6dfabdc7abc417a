/**
 * The Koa application, outermost first: request ids, the access log, error
 * bodies, readiness (GET /ready; 503 with `Connection: close` while draining),
 * the metrics' counting, CORS (when asked for), the
 * dead-engine gate, body parsing, then the routes (the playground page at / among them).
 */
import Router from '@koa/router';
import Koa from 'koa';
import { HttpError } from '../wire/http-error';
import { jsonBodies } from './http/body';
import { cors } from './http/cors';
import { errorBodies } from './http/errors';
import { requestIds } from './http/request-id';
import { answerRoute } from './routes/answer';
import { answerDeadHealth, infoRoutes, RETRY_AFTER_DEAD_S } from './routes/info';
import { systemoneRoute } from './routes/systemone';
import { taskRoutes } from './routes/tasks';
import { abstentionRoutes } from './routes/abstention';
import { playgroundRoutes } from './routes/playground';
import { Service } from './service/service';
import { accessLog } from './ops/access-log';
import { Lifecycle } from './ops/lifecycle';
import { Logger } from './ops/logger';
import { METRICS_CONTENT_TYPE, Metrics } from './ops/metrics';

/** Answered in every state, a dead engine or a drain included: what monitoring reads. */
const MONITORING = new Set(['/health', '/metrics']);

/** GET /ready (200 only while serving with every engine up), and the drain's 503s. */
function readiness(service: Service, lifecycle: Lifecycle): Koa.Middleware {
  return async (ctx, next) => {
    if (ctx.path === '/ready' && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
      const ready = lifecycle.state === 'ready' && !service.deadReason;
      ctx.status = ready ? 200 : 503;
      ctx.body = { ready, state: service.deadReason ? 'engine dead' : lifecycle.state };
      return;
    }
    if (lifecycle.state === 'draining' && !MONITORING.has(ctx.path)) {
      ctx.set('Connection', 'close');
      throw new HttpError(503, 'the server is shutting down: send this request to another replica', { 'Retry-After': '1' });
    }
    await next();
  };
}

/** Once an engine has died: /health says so (503), /metrics still answers, every other route gets 503 with the reason. */
function deadEngineGate(service: Service): Koa.Middleware {
  return async (ctx, next) => {
    if (!service.deadReason || ctx.path === '/metrics') return next();
    if (ctx.path !== '/health') throw new HttpError(503, service.deadReason, { 'Retry-After': RETRY_AFTER_DEAD_S });
    answerDeadHealth(ctx, service.deadReason);
  };
}

export interface Operations {
  lifecycle: Lifecycle;
  logger: Logger;
  logBodies: boolean;
  metrics: Metrics;
}

export function createApp(service: Service, ops: Operations): Koa {
  const app = new Koa();
  app.use(requestIds());
  app.use(accessLog(ops.logger, ops.logBodies));
  app.use(ops.metrics.middleware());
  app.use(errorBodies());
  app.use(readiness(service, ops.lifecycle));
  if (service.corsOrigin) app.use(cors(service.corsOrigin));

  app.use(deadEngineGate(service));

  app.use(jsonBodies());
  const router = new Router();
  systemoneRoute(router, service);
  answerRoute(router, service);
  taskRoutes(router, service);
  abstentionRoutes(router, service);
  infoRoutes(router, service);
  playgroundRoutes(router);
  router.get('/metrics', async (ctx) => {
    ctx.type = METRICS_CONTENT_TYPE;
    ctx.body = await ops.metrics.render();
  });
  app.use(router.routes());
  app.use(router.allowedMethods());
  app.on('error', (e, ctx) => ops.logger.error({ err: e, request_id: ctx?.state?.requestId }, 'internal error'));
  return app;
}
