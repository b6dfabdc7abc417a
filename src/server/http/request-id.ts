/**
 * A request id on every response, errors included, as the format's
 * `x-typesafe-request-id` (the Python client raises without it) and as
 * `x-request-id`. An incoming `X-Request-Id` of printable ASCII (at most 128
 * characters) is honoured, so a proxy's or a client's id follows the request;
 * otherwise a new one is made.
 */
import { randomBytes } from 'crypto';
import { Middleware } from 'koa';

const acceptable = /^[\x21-\x7e]{1,128}$/;

export function newRequestId(): string {
  return 'req_' + randomBytes(12).toString('hex');
}

export function requestIds(): Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get('x-request-id');
    const id = acceptable.test(incoming) ? incoming : newRequestId();
    ctx.state.requestId = id;
    ctx.set('x-typesafe-request-id', id);
    ctx.set('x-request-id', id);
    await next();
  };
}
