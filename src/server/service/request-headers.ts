/**
 * Request headers of the main route, with their earlier names still honoured:
 * `x-jev-route` for `x-service-route`, `x-jev-debug` for `x-service-debug`.
 */
import { createHash } from 'crypto';
import { Context } from 'koa';
import { invalid } from '../../wire/http-error';

function header(ctx: Context, name: string, alias: string): string | undefined {
  const v = ctx.get(name) || ctx.get(alias);
  return v ? v.trim().toLowerCase() : undefined;
}

export function requestedRoute(ctx: Context): 'text' | 'image' | undefined {
  const v = header(ctx, 'x-service-route', 'x-jev-route');
  if (v === undefined || v === 'text' || v === 'image') return v;
  throw invalid(['header', 'x-service-route'], `must be "text" or "image", got ${JSON.stringify(v)}`, 'literal_error');
}

export function requestedDebug(ctx: Context): 'readout' | 'hidden' | undefined {
  const v = header(ctx, 'x-service-debug', 'x-jev-debug');
  if (v === undefined || v === 'readout' || v === 'hidden') return v;
  throw invalid(['header', 'x-service-debug'], `must be "readout" or "hidden", got ${JSON.stringify(v)}`, 'literal_error');
}

/** The longest cache salt accepted, in bytes. */
export const MAX_CACHE_SALT_BYTES = 256;

/**
 * The request's cache salt (docs/operations.md, "Multi-tenant serving behind a proxy"): `x-cache-salt`,
 * else the header --cache-salt-header names, else none. Taken as sent (no trimming or case folding:
 * two tenants' salts differ by any byte). Empty or over 256 bytes: 422.
 */
export function requestedCacheSalt(ctx: Context, fallbackHeader?: string): string | undefined {
  const name = ctx.headers['x-cache-salt'] !== undefined || !fallbackHeader ? 'x-cache-salt' : fallbackHeader.toLowerCase();
  const v = ctx.headers[name];
  if (v === undefined) return undefined;
  const salt = Array.isArray(v) ? v.join(',') : v;
  if (salt === '' || Buffer.byteLength(salt, 'latin1') > MAX_CACHE_SALT_BYTES)
    throw invalid(['header', name], `a cache salt must be a non-empty string of at most ${MAX_CACHE_SALT_BYTES} bytes, got ${salt === '' ? 'an empty one' : `${Buffer.byteLength(salt, 'latin1')} bytes`}`, 'string_type');
  return salt;
}

/** `X-State-Key`: the client's name for its state, which keeps a state's requests on one engine (docs/operations.md). */
export function requestedStateKey(ctx: Context): string | undefined {
  return ctx.get('x-state-key') || undefined;
}

/** What logs and reports may say of a salt: a short hash, never the salt. */
export function saltTag(salt: string): string {
  return createHash('sha256').update(salt).digest('hex').slice(0, 12);
}

/** The engine's stages as `Server-Timing` entries (`prepare;dur=1.20, warm;dur=30.52, ...`). */
export function serverTiming(stages: Record<string, number>): string {
  return Object.entries(stages)
    .map(([k, v]) => `${k};dur=${v.toFixed(2)}`)
    .join(', ');
}

export function stagesHeader(stages: Record<string, number>): string {
  return Object.entries(stages)
    .map(([k, v]) => `${k}=${v.toFixed(2)}`)
    .join(';');
}
