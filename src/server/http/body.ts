/**
 * Reads and parses JSON request bodies. Our own reader rather than koa-body's:
 * koa-body parses with `bourne` set to reject any `__proto__` key (a 422 for a
 * question or option of that name, even inside an unknown field), and on an
 * oversized body it leaves the connection half-read, so the next request on a
 * keep-alive connection stalled for seconds. Here:
 *
 * - `JSON.parse` makes every key, `__proto__` included, an own data property:
 *   names are data, and no prototype is touched;
 * - the size limit applies to the decompressed body (a gzip bomb is cut off at
 *   the limit): over it is 413, and any failed read closes the connection,
 *   once the client has sent the rest of its body (lingering-close.ts);
 * - a leading byte-order mark is skipped (RFC 8259 allows ignoring it);
 * - the body is JSON, or multipart/form-data with the JSON in its `request`
 *   field and image files beside it (multipart.ts, `ctx.state.uploads`);
 *   another content type is 422, as is malformed JSON, with the position of
 *   the error.
 *
 * The raw text is kept (`ctx.state.rawBody`; for multipart, the JSON and the
 * files' hashes): identical bodies in flight share one computation (../inflight.ts).
 */
import inflate from 'inflation';
import { Middleware } from 'koa';
import getRawBody from 'raw-body';
import { createHash } from 'crypto';
import { IncomingHttpHeaders } from 'http';
import { HttpError, invalid } from '../../wire/http-error';
import { lingerBeforeClose } from './lingering-close';
import { parseMultipart } from './multipart';

declare module 'koa' {
  interface Request {
    /** The parsed JSON body of a POST. */
    body?: unknown;
  }
}

export const MAX_BODY_BYTES = 64 << 20;

function readFailure(e: any): HttpError {
  const close = { Connection: 'close' };
  if (e?.status === 413) return new HttpError(413, `the body is larger than the limit of ${MAX_BODY_BYTES >> 20} MiB (decompressed)`, close);
  if (e?.status === 415) return new HttpError(415, `${e.message}; send the body as is, or with gzip, deflate or br`, close);
  if (typeof e?.code === 'string' && e.code.startsWith('Z_')) return new HttpError(400, `the body could not be decompressed: ${e.message}`, close);
  return new HttpError(400, `the body could not be read: ${e?.message ?? String(e)}`, close);
}

/** application/json, or any type suffixed +json (application/problem+json...). */
const JSON_TYPE = /^(application\/json|[\w.!#$&^-]+\/[\w.!#$&^+-]+\+json)$/;

/**
 * The body's media type, lower-cased, without its parameters; none for a request that has no body (neither
 * Content-Length nor Transfer-Encoding) or no Content-Type. What Koa's `ctx.is` (type-is) decided, read directly:
 * every request paid for its general matcher twice (bench/README.md, "Front end").
 */
function mediaType(headers: IncomingHttpHeaders): string | undefined {
  const type = headers['content-type'];
  if (type === undefined || (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined)) return undefined;
  const semicolon = type.indexOf(';');
  return (semicolon < 0 ? type : type.slice(0, semicolon)).trim().toLowerCase();
}

export function jsonBodies(): Middleware {
  return async (ctx, next) => {
    if (ctx.method !== 'POST') return next();
    let raw: Buffer;
    try {
      const identity = (ctx.get('content-encoding') || 'identity').toLowerCase() === 'identity';
      raw = await getRawBody(inflate(ctx.req), { limit: MAX_BODY_BYTES, length: identity ? ctx.get('content-length') || undefined : undefined });
    } catch (e) {
      lingerBeforeClose(ctx.req);
      throw readFailure(e);
    }
    let text: string, fileHashes = '';
    const type = mediaType(ctx.req.headers);
    if (type === 'multipart/form-data' && ctx.path === '/v1/systemone') {
      const multipart = await parseMultipart(ctx.req.headers, raw);
      text = multipart.request;
      ctx.state.uploads = multipart.files;
      fileHashes = multipart.files.map((f) => createHash('sha256').update(f.bytes).digest('hex')).join(',');
    } else if (type !== undefined && JSON_TYPE.test(type)) text = raw.toString('utf8');
    else throw invalid(['body'], `must be JSON sent with Content-Type: application/json, or multipart/form-data on /v1/systemone (got ${ctx.get('content-type') || 'no Content-Type'})`, 'model_attributes_type');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    try {
      ctx.request.body = JSON.parse(text);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      const at = /position (\d+)/.exec(message);
      throw invalid(at ? ['body', Number(at[1])] : ['body'], `body is not valid JSON: ${message}`, 'json_invalid');
    }
    ctx.state.rawBody = fileHashes ? `${text}\n${fileHashes}` : text;
    return next();
  };
}
