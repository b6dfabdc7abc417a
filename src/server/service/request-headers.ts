/**
 * Request headers of the main route, with their earlier names still honoured:
 * `x-jev-route` for `x-service-route`, `x-jev-debug` for `x-service-debug`.
 */
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

/** The engine's stages as `Server-Timing` entries (`prepare;dur=1.2, warm;dur=30.5, ...`). */
export function serverTiming(stages: Record<string, number>): string {
  return Object.entries(stages)
    .map(([k, v]) => `${k};dur=${v.toFixed(1)}`)
    .join(', ');
}

export function stagesHeader(stages: Record<string, number>): string {
  return Object.entries(stages)
    .map(([k, v]) => `${k}=${v.toFixed(1)}`)
    .join(';');
}
