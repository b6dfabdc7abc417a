/**
 * One JSON log line per request (ops/logger.ts): time, request id, method, path and matched route,
 * status, duration, and for an answered question request the route that served it, input and
 * cached tokens, batch size and the tasks applied (`ctx.state.answered`, set by routes/respond.ts);
 * a short error code for an error status. Probes (/ready, /health, /metrics) are logged at debug.
 * The body (states and questions) only with --log-bodies.
 *
 * The line is written just after the response: Koa writes the response once the middleware chain has returned,
 * and a write to the log is a system call that often wakes its reader (a pipe to journald, docker, a terminal).
 * Written before it, it held every response back (bench/README.md, "Front end").
 */
import { Context, Middleware } from 'koa';
import { requestStart } from '../http/request-id';
import { Logger } from './logger';

/** What an answering route reports of a request it answered. */
export interface AnsweredFields {
  service_route: 'text' | 'image';
  input_tokens: number;
  cached_tokens: number;
  batch_size: number;
  tasks: string[];
  stages: Record<string, number>;
  /** A short hash of the request's cache salt (request-headers.ts saltTag), never the salt. */
  cache_salt?: string;
  /** Which of several serving engines answered. */
  engine?: number;
}

const ERROR_CODES: Record<number, string> = {
  400: 'bad_request', 404: 'not_found', 405: 'method_not_allowed', 409: 'conflict', 413: 'too_large', 415: 'unsupported_media_type',
  422: 'invalid_request', 431: 'headers_too_large', 499: 'client_gone', 500: 'internal', 503: 'unavailable',
};
const PROBES = new Set(['/ready', '/health', '/metrics']);

export function matchedRoute(ctx: Context): string | null {
  return (ctx as Context & { _matchedRoute?: string })._matchedRoute ?? null;
}

export function accessLog(logger: Logger, logBodies: boolean): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } finally {
      const a = ctx.state.answered as AnsweredFields | undefined;
      const line = {
        request_id: ctx.state.requestId,
        method: ctx.method,
        path: ctx.path,
        route: matchedRoute(ctx),
        status: ctx.status,
        duration_ms: Math.round((performance.now() - requestStart(ctx)) * 10) / 10,
        ...(a ? { service_route: a.service_route, input_tokens: a.input_tokens, cached_tokens: a.cached_tokens, batch_size: a.batch_size, tasks: a.tasks } : {}),
        ...(a?.cache_salt ? { cache_salt: a.cache_salt } : {}),
        ...(a?.engine !== undefined ? { engine: a.engine } : {}),
        ...(ctx.status >= 400 ? { error_code: ERROR_CODES[ctx.status] ?? `http_${ctx.status}` } : {}),
        ...(logBodies && ctx.request.body !== undefined ? { body: ctx.request.body } : {}),
      };
      const probe = PROBES.has(ctx.path);
      setImmediate(() => (probe ? logger.debug(line, 'request') : logger.info(line, 'request')));
    }
  };
}
