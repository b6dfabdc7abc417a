/**
 * A request id on every response, errors included, as the format's
 * `x-typesafe-request-id` (the Python client raises without it) and as
 * `x-request-id`. An incoming `X-Request-Id` of printable ASCII (at most 128
 * characters) is honoured, so a proxy's or a client's id follows the request;
 * otherwise a new one is made. The same middleware, the outermost, notes when the request arrived:
 * one start time for `x-service-server-ms`, the access log and the metrics.
 */
import { randomFillSync } from 'crypto';
import { Context, Middleware } from 'koa';

const acceptable = /^[\x21-\x7e]{1,128}$/;

const ID_BYTES = 12;
// Drawn a few KiB at a time: a system call per 341 ids rather than one per request (where
// system calls are dear, as under nested virtualization, one cost more than the rest of the id).
const pool = Buffer.alloc(ID_BYTES * 341);
let used = pool.length;

export function newRequestId(): string {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  used += ID_BYTES;
  return 'req_' + pool.toString('hex', used - ID_BYTES, used);
}

/** When the request reached the server (`performance.now()`). */
export function requestStart(ctx: Context): number {
  return ctx.state.startedAt;
}

export function requestIds(): Middleware {
  return async (ctx, next) => {
    ctx.state.startedAt = performance.now();
    const incoming = ctx.get('x-request-id');
    const id = acceptable.test(incoming) ? incoming : newRequestId();
    ctx.state.requestId = id;
    ctx.set('x-typesafe-request-id', id);
    ctx.set('x-request-id', id);
    await next();
  };
}
